"""Stages of the audio scaling pipeline: front end, corpus, prep, pretrain, evaluate, tracking."""

__version__ = "0.1.0"
