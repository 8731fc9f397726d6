"""The parts of `benchmarks/gpu_acceptance.py`: one module per thing it checks (no Ray, no MLflow)."""
