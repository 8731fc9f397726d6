#!/usr/bin/env bash
# The README's main-job command: on a fresh machine it installs what is missing (venv, pins,
# Debian packages), builds the embedded defaults when they are missing (default corpus, labeled
# tasks, mel shards), runs the default scaling study on CPU with a local Ray and a local MLflow,
# and prints how to open the MLflow UI on it. Safe to re-run: finished steps are skipped.
set -euo pipefail
started=$SECONDS
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# The install's share of the run, printed with the study's phases at the end (sweeps/study/phase_times.py).
export AUDIOSCALE_INSTALL_SECONDS=$((SECONDS - started))
cd "$REPO_ROOT"
python -m sweeps.scaling --grid mask_ratio "$@"
