"""Masked-modelling audio models in pure PyTorch (no Ray, no MLflow)."""
