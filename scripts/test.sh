#!/usr/bin/env bash
# The README's test command: installs what is missing (venv, pins, Debian packages), then runs the
# whole suite on CPU, then lists the 25 slowest tests. Extra arguments go to pytest (e.g. `bash scripts/test.sh tests/models -x`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$REPO_ROOT"
# --durations: every run ends with its slowest tests, so a CI log says where the time goes.
python -m pytest --durations=25 "${@:-tests}"
