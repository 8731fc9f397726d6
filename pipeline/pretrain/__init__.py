"""Stage 2, `python -m pipeline.pretrain`: masked pretraining on Ray Train (config, driver, per-worker loop)."""
