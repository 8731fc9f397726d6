#!/usr/bin/env bash
# The README's test command: installs what is missing (venv, pins, Debian packages), then runs the
# whole suite on CPU. Extra arguments go to pytest (e.g. `bash scripts/test.sh tests/models -x`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$REPO_ROOT"
python -m pytest "${@:-tests}"
