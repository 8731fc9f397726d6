"""Pooling heads trained on frozen frame embeddings (the language-ID probe) and their attention kernels."""
