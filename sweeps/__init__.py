"""Scaling studies: grids, the Ray Tune driver, scaling-law fits and the study report."""
