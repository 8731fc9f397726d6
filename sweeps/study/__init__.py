"""A scaling study on Ray Tune: grids, trials, the MLflow ledger, RankMe early stopping."""
