"""Stage 3, `python -m pipeline.evaluate`: RankMe and probe quality of a checkpoint, HEAR API."""
