"""`python -m pipeline.corpus`: the default pretraining corpus and labeled tasks, built offline."""
