"""Scaling-law fitting: law forms, the converged fitter, profile intervals, the Chinchilla check. `python -m sweeps.laws` refits a study."""
