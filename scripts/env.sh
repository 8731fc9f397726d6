#!/usr/bin/env bash
# Sourced by the README's commands: makes (once) the shared virtual environment of the pins, makes
# this checkout's own `.venv` on top of it with the project installed editable, activates that,
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

# The pins go in with uv (from PyPI, bootstrapped by pip): it downloads and unpacks in parallel and
# leaves bytecode to the first import, 1.4 min against pip's 4.0 min for the same 172 packages and
# versions on a fresh 2-core machine (docs/performance.md). uv does not read pip's configuration, so
# where pip is pointed at another index (a mirror, a proxy) pip does the install, as it does when uv
# cannot be had or fails.
install_pins() {
  local python="$VENV_DIR/bin/python"
  if [ -z "${PIP_INDEX_URL:-}" ] && ! "$python" -m pip config get global.index-url >/dev/null 2>&1 &&
    "$python" -m pip install -q uv >/dev/null 2>&1 &&
    "$VENV_DIR/bin/uv" pip install -q --python "$python" -r "$REPO_ROOT/requirements-dev.txt"; then
    return 0
  fi
  echo "[env] installing the pins with pip"
  "$python" -m pip install -q --upgrade pip && "$python" -m pip install -q -r "$REPO_ROOT/requirements-dev.txt"
}

make_venv() {
  if [ -f "$VENV_DIR/.complete" ]; then return 0; fi
  echo "[env] creating virtual environment at $VENV_DIR (first run: a few minutes, ~8 GB)"
  rm -rf "$VENV_DIR" &&
    mkdir -p "$(dirname "$VENV_DIR")" &&
    "$PYTHON_BIN" -m venv "$VENV_DIR" &&
    install_pins &&
    touch "$VENV_DIR/.complete" ||
    { echo "[env] creating $VENV_DIR failed; re-run to retry" >&2; return 1; }
}

# On a fresh machine the Debian packages (~1.2 min) install while the pins do, not before them.
install_debian_packages_and_venv() {
  if [ -f "$VENV_DIR/.complete" ]; then
    install_debian_packages || return 1
    return 0
  fi
  local debian_log debian_status=0
  debian_log="$(mktemp)"
  install_debian_packages >"$debian_log" 2>&1 &
  local debian_pid=$!
  make_venv
  local venv_status=$?
  wait "$debian_pid" || debian_status=$?
  cat "$debian_log"
  rm -f "$debian_log"
  [ "$debian_status" -eq 0 ] && [ "$venv_status" -eq 0 ]
}

# `.venv` at the repository root (the ecosystem's convention, what editors and `source
# .venv/bin/activate` look for) is this checkout's own small venv: the same Python as the shared
# venv above, whose site-packages it reads through a .pth line (so no second ~8 GB install), with
# its own editable install of this checkout on top. Several clones and worktrees then never
# interfere: each one's `import pipeline` is its own, whoever ran env.sh last. Only path lines
# are read from the shared venv, never its .pth files, so an editable install that an older
# checkout left there is ignored. The shared venv's commands (ray, mlflow, pytest, ...) get
# copies in .venv/bin that run with this venv's Python.
CHECKOUT_VENV="$REPO_ROOT/.venv"
CHECKOUT_MARK="$CHECKOUT_VENV/.audioscale-checkout-venv"

make_checkout_venv() {
  if [ -L "$CHECKOUT_VENV" ]; then
    rm -f "$CHECKOUT_VENV" && echo "[env] replacing the .venv link with this checkout's own venv"
  elif [ -e "$CHECKOUT_VENV" ] && [ ! -f "$CHECKOUT_MARK" ]; then
    echo "[env] $CHECKOUT_VENV exists and is not audioscale's; leaving it alone" >&2
    echo "[env] (move it away and re-run to get the project's environment behind .venv)" >&2
    return 1
  fi
  local shared_site
  shared_site="$("$VENV_DIR/bin/python" -I -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || return 1
  if [ ! -f "$CHECKOUT_MARK" ] || [ "$(cat "$CHECKOUT_MARK")" != "$VENV_DIR" ]; then
    echo "[env] making $CHECKOUT_VENV (this checkout's venv, reading $VENV_DIR)"
    rm -rf "$CHECKOUT_VENV" && "$VENV_DIR/bin/python" -m venv --without-pip "$CHECKOUT_VENV" ||
      { echo "[env] cannot make $CHECKOUT_VENV" >&2; return 1; }
  fi
  local own_site
  own_site="$("$CHECKOUT_VENV/bin/python" -I -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || return 1
  echo "$shared_site" >"$own_site/audioscale-shared-venv.pth" || return 1
  link_shared_commands || return 1
  echo "$VENV_DIR" >"$CHECKOUT_MARK"
}

# Each command of the shared venv, run by this venv's Python: a script's first line is rewritten
# (pip does the same when it installs one); anything else (a binary such as ruff) is linked.
link_shared_commands() {
  local source name first
  for source in "$VENV_DIR"/bin/*; do
    name="$(basename "$source")"
    case "$name" in python* | activate* | Activate.ps1) continue ;; esac
    [ -d "$source" ] && continue # a package's bin/__pycache__ (moto's dependencies leave one)
    [ -e "$CHECKOUT_VENV/bin/$name" ] && [ ! -L "$CHECKOUT_VENV/bin/$name" ] &&
      grep -q "^#!$CHECKOUT_VENV/bin/python" "$CHECKOUT_VENV/bin/$name" 2>/dev/null && continue
    IFS= read -r first <"$source" || first=""
    if [[ "$first" == "#!"*python* ]]; then
      { echo "#!$CHECKOUT_VENV/bin/python"; tail -n +2 "$source"; } >"$CHECKOUT_VENV/bin/$name" &&
        chmod +x "$CHECKOUT_VENV/bin/$name" || return 1
    else
      ln -sfn "$source" "$CHECKOUT_VENV/bin/$name" || return 1
    fi
  done
}

# Installs the project itself into the checkout's venv, editable (`pip install -e .`): `python -m
# pipeline...` then works from any directory (e.g. the entrypoint of `ray job submit`), and the
# stage CLIs of pyproject's [project.scripts] land in .venv/bin. --no-deps: the pins are in the
# shared venv; --no-build-isolation: no download of a build environment, so setuptools>=68
# (pyproject's build-system) must be in the shared venv (70.1+ builds editable wheels without the
# `wheel` package). Re-installed when pyproject's entry points changed.
editable_install_current() {
  "$CHECKOUT_VENV/bin/python" -I - "$REPO_ROOT" <<'PY'
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
  editable_install_current && return 0
  "$VENV_DIR/bin/python" -I -c '
import sys, setuptools
v = tuple(int(p) for p in setuptools.__version__.split(".")[:2])
try:
    import wheel  # noqa: F401  (setuptools 68-70.0 needs it for editable wheels)
    has_wheel = True
except ImportError:
    has_wheel = False
sys.exit(0 if v >= (70, 1) or (v >= (68, 0) and has_wheel) else 1)' 2>/dev/null ||
    (
      # One upgrade of the shared venv at a time (clones sharing it may run env.sh together).
      flock -w 600 9 || { echo "[env] timed out waiting for $VENV_DIR/.install.lock" >&2; exit 1; }
      echo "[env] upgrading setuptools in $VENV_DIR (pyproject's build-system needs >=68)"
      "$VENV_DIR/bin/python" -m pip install -q "setuptools>=70.1"
    ) 9>"$VENV_DIR/.install.lock" ||
    { echo "[env] installing setuptools>=70.1 into $VENV_DIR failed" >&2; return 1; }
  echo "[env] installing audioscale (editable) from $REPO_ROOT into $CHECKOUT_VENV"
  # pip runs from the shared venv's files but installs into this venv (sys.prefix); the build
  # backend's warnings go to the log (shown when the install fails).
  "$CHECKOUT_VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$REPO_ROOT" \
    >"$CHECKOUT_VENV/.install.log" 2>&1 ||
    { cat "$CHECKOUT_VENV/.install.log" >&2; echo "[env] pip install -e $REPO_ROOT failed" >&2; return 1; }
  link_shared_commands
}

install_debian_packages_and_venv || return 1
make_checkout_venv || return 1
install_project || return 1
# shellcheck disable=SC1091
source "$CHECKOUT_VENV/bin/activate"
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"
# One auth mode for every Ray process on this machine (stack.md: mixed modes fail).
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
export AUDIOSCALE_REPO="$REPO_ROOT"
