#!/usr/bin/env bash
# Sourced by the README's commands: makes (once) and activates the project's virtual environment,
# installs the project into it (editable) behind `.venv` at the repository root, installs the
# Debian packages the pipeline needs, and puts the repository on PYTHONPATH.
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

# `.venv` at the repository root (the ecosystem's convention, what editors and `source
# .venv/bin/activate` look for) is a link to the pin-keyed venv above, so the README's one
# activation line works in any new shell while fresh clones still reuse a finished install.
link_repo_venv() {
  local link="$REPO_ROOT/.venv" target
  target="$(cd "$VENV_DIR" && pwd)" || return 1  # absolute, even for a relative AUDIOSCALE_VENV
  if [ -L "$link" ]; then
    # A link to another venv (the pins changed, or AUDIOSCALE_VENV did): follow the current one.
    [ "$(readlink "$link")" = "$target" ] && return 0
    ln -sfn "$target" "$link" || { echo "[env] cannot re-point $link at $target" >&2; return 1; }
    echo "[env] re-pointed $link at $target"
  elif [ -e "$link" ]; then
    # A real directory here is either the venv itself (AUDIOSCALE_VENV=$REPO_ROOT/.venv) or the
    # user's own: never delete it.
    [ "$(cd "$link" && pwd -P)" = "$(cd "$target" && pwd -P)" ] && return 0
    echo "[env] $link exists and is not a link to $target; leaving it alone" >&2
    echo "[env] (move it away and re-run to get the project's environment behind .venv)" >&2
  else
    ln -s "$target" "$link" || { echo "[env] cannot create $link" >&2; return 1; }
  fi
}

# Installs the project itself into the venv, editable (`pip install -e .`): `python -m pipeline...`
# then works from any directory (e.g. the entrypoint of `ray job submit`), and the stage CLIs of
# pyproject's [project.scripts] land in the venv's bin/. --no-deps: the pins are already there;
# --no-build-isolation: no download of a build environment, so setuptools>=68 (pyproject's
# build-system) must be in the venv (70.1+ builds editable wheels without the `wheel` package).
# Several clones share one pin-keyed venv, and the editable install can point at only one of them:
# when it points at another checkout (or pyproject's entry points changed), re-point it at this
# one. That takes a few seconds, and every script works from its own checkout anyway (PYTHONPATH
# below and the current directory come before the editable finder on sys.path).
editable_install_current() {
  "$VENV_DIR/bin/python" -I - "$REPO_ROOT" <<'PY'
import importlib.metadata as md, importlib.util, json, sys, tomllib
from pathlib import Path
repo = Path(sys.argv[1]).resolve()
try:
    dist = md.distribution("audioscale")
except md.PackageNotFoundError:
    sys.exit(1)
url = json.loads(dist.read_text("direct_url.json") or "{}")
if not (url.get("dir_info", {}).get("editable") and url.get("url") == repo.as_uri()):
    sys.exit(1)
wanted = tomllib.loads((repo / "pyproject.toml").read_text())["project"].get("scripts", {})
if {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"} != wanted:
    sys.exit(1)
for package in ("pipeline", "models", "sweeps"):  # -I: no cwd, no PYTHONPATH on sys.path
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin or not Path(spec.origin).resolve().is_relative_to(repo):
        sys.exit(1)
PY
}

install_project() {
  (
    # One install at a time per venv (clones sharing it may run env.sh together).
    flock -w 600 9 || { echo "[env] timed out waiting for $VENV_DIR/.install.lock" >&2; exit 1; }
    editable_install_current && exit 0
    "$VENV_DIR/bin/python" -I -c '
import sys, setuptools
v = tuple(int(p) for p in setuptools.__version__.split(".")[:2])
try:
    import wheel  # noqa: F401  (setuptools 68-70.0 needs it for editable wheels)
    has_wheel = True
except ImportError:
    has_wheel = False
sys.exit(0 if v >= (70, 1) or (v >= (68, 0) and has_wheel) else 1)' 2>/dev/null ||
      { echo "[env] upgrading setuptools in $VENV_DIR (pyproject's build-system needs >=68)" &&
        "$VENV_DIR/bin/python" -m pip install -q "setuptools>=70.1"; } ||
      { echo "[env] installing setuptools>=70.1 into $VENV_DIR failed" >&2; exit 1; }
    echo "[env] installing audioscale (editable) from $REPO_ROOT into $VENV_DIR"
    # The build backend's warnings go to the log (shown when the install fails).
    "$VENV_DIR/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$REPO_ROOT" \
      >"$VENV_DIR/.install.log" 2>&1 ||
      { cat "$VENV_DIR/.install.log" >&2; echo "[env] pip install -e $REPO_ROOT failed" >&2; exit 1; }
  ) 9>"$VENV_DIR/.install.lock"
}

install_debian_packages || return 1
make_venv || return 1
install_project || return 1
link_repo_venv || return 1
# shellcheck disable=SC1091
source "$VENV_DIR/bin/activate"
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"
# One auth mode for every Ray process on this machine (stack.md: mixed modes fail).
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
export AUDIOSCALE_REPO="$REPO_ROOT"
