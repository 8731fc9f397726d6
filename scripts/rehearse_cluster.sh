#!/usr/bin/env bash
# The cluster rehearsal, for a user who wants to try the cluster path before renting GPUs: an
# S3-compatible store and an MLflow server (basic-auth, artifacts in the bucket) on 127.0.0.1, every
# stage run against them (cluster/README.md, "Rehearse on one machine"), then what a bucket changes
# for prep and for the training reader. Installs what it needs on first use, like the README's commands.
# Extra arguments go to the rehearsal (e.g. `--only evaluate`, `--work DIR` to keep its logs).
# The throughput figures are printed whatever the verdicts; the exit code is the rehearsal's.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$REPO_ROOT"
status=0
python -m cluster.rehearsal "$@" || status=$?
python benchmarks/bench_bucket_throughput.py
exit "$status"
