"""The bottom floor of `sweeps`: what a study does to each trial (its recipe and the early-stop rule)."""
