"""Downstream probes on frozen embeddings: the HEAR MLP grid, the LID head, task metrics."""
