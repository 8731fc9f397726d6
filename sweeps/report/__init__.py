"""A study's report: which laws its trials support, the Q trend check, early prediction, figures, markdown."""
