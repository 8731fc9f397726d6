"""The cluster rehearsal: the path a cluster user takes (shards, checkpoints and MLflow artifacts in a
bucket, a tracking server, Ray jobs), run on one machine against real servers on loopback.

`python -m cluster.rehearsal` runs it and prints what it exercised (`bash scripts/rehearse_cluster.sh`
from a fresh checkout); `python -m cluster.rehearsal.object_store` starts only the S3-compatible
store, for trying the cluster commands by hand. The servers here are test doubles of a cloud's
services, never product code: nothing under `pipeline/`, `models/` or `sweeps/` imports them.
"""
