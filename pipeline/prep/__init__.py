"""Stage 1, `python -m pipeline.prep`: raw audio -> Parquet log-mel shards on Ray Data."""
