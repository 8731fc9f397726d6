"""The mel shard contract (Parquet rows + manifest), where shards live, and the training crop reader."""
