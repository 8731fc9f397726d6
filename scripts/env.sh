#!/usr/bin/env bash
# Sourced by the README's commands: makes (once) and activates the project's virtual environment,
# installs the Debian packages the pipeline needs, and puts the repository on PYTHONPATH.
# Safe to re-run: every step is skipped when its completion marker is present.
# No `set -e` here: this file is sourced, and shell options would leak into an interactive shell.
# Steps that must succeed say so with `|| return 1`; the calling scripts set -euo pipefail themselves.
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON_BIN="${PYTHON_BIN:-python3.11}"
command -v "$PYTHON_BIN" >/dev/null 2>&1 || PYTHON_BIN=python3

# The venv lives outside the checkout, keyed by the pins, so a fresh clone (CI) reuses a finished
# install of the same pins instead of pulling ~7 GB of torch again.
pins_hash=$(cat "$REPO_ROOT/requirements.txt" "$REPO_ROOT/requirements-dev.txt" | sha256sum | cut -c1-12)
VENV_DIR="${AUDIOSCALE_VENV:-$HOME/.cache/audioscale/venv-$pins_hash}"

install_debian_packages() {
  # libsndfile ships inside the soundfile wheel; the list is for the default corpus and tests.
  local wanted=()
  mapfile -t wanted < <(grep -vE '^\s*(#|$)' "$REPO_ROOT/scripts/debian-packages.txt")
  local missing=()
  for pkg in "${wanted[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "[env] installing Debian packages: ${missing[*]}"
    apt-get update -qq >/dev/null &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
      { echo "[env] apt-get install failed for: ${missing[*]}" >&2; return 1; }
  else
    echo "[env] missing Debian packages: ${missing[*]}" >&2
    echo "[env] run: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  fi
}

make_venv() {
  if [ -f "$VENV_DIR/.complete" ]; then return 0; fi
  echo "[env] creating virtual environment at $VENV_DIR (first run: several minutes, ~8 GB)"
  rm -rf "$VENV_DIR" &&
    mkdir -p "$(dirname "$VENV_DIR")" &&
    "$PYTHON_BIN" -m venv "$VENV_DIR" &&
    "$VENV_DIR/bin/python" -m pip install -q --upgrade pip &&
    "$VENV_DIR/bin/python" -m pip install -q -r "$REPO_ROOT/requirements-dev.txt" &&
    touch "$VENV_DIR/.complete" ||
    { echo "[env] creating $VENV_DIR failed; re-run to retry" >&2; return 1; }
}

install_debian_packages || return 1
make_venv || return 1
# shellcheck disable=SC1091
source "$VENV_DIR/bin/activate"
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"
# One auth mode for every Ray process on this machine (stack.md: mixed modes fail).
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
export AUDIOSCALE_REPO="$REPO_ROOT"
