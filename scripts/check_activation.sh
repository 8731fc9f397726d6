#!/usr/bin/env bash
# Checks the README's activation line the way a user meets it: in a clean new shell (no profile, no
# inherited environment), run only `source .venv/bin/activate` from the repository root, then the
# user's own commands: `python -m sweeps.scaling --help` in the checkout and outside it (the
# editable install, which `ray job submit` entrypoints rely on), `ray --version`, `mlflow --version`.
# Needs the environment that scripts/env.sh makes (scripts/test.sh or scripts/main.sh run it).
# Exits non-zero, naming what failed, when any check fails. CI runs it (.ci/run), and so does the
# suite (tests/test_environment.py).
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ACTIVATE='source .venv/bin/activate'  # the README's line, verbatim
outside="$(mktemp -d)"
trap 'rm -rf "$outside"' EXIT
failures=0

# Runs $2 in a clean shell that first runs the activation line from the repository root.
check() {
  local what="$1" commands="$2" output
  if output="$(cd "$REPO_ROOT" && env -i HOME="$HOME" PATH=/usr/local/bin:/usr/bin:/bin \
      bash --noprofile --norc -c "$ACTIVATE && $commands" 2>&1)"; then
    echo "ok    $what${3:+: $(printf '%s\n' "$output" | grep -m1 -E "$3")}"
  else
    echo "FAIL  $what (in a clean shell after \`$ACTIVATE\` in $REPO_ROOT):" >&2
    printf '%s\n' "$output" | tail -n 15 | sed 's/^/      /' >&2
    failures=$((failures + 1))
  fi
}

if [ ! -f "$REPO_ROOT/.venv/bin/activate" ]; then
  echo "FAIL  $REPO_ROOT/.venv/bin/activate is missing: run \`bash scripts/test.sh\` or" >&2
  echo "      \`source scripts/env.sh\` once from the checkout to make the environment" >&2
  exit 1
fi

q_outside="$(printf '%q' "$outside")"
q_init="$(printf '%q' "$REPO_ROOT/sweeps/__init__.py")"
check "python -m sweeps.scaling --help (in the checkout)" \
  "python -m sweeps.scaling --help" '^usage:'
check "ray --version" "ray --version" 'version'
check "mlflow --version" "mlflow --version" 'version'
check "python -m sweeps.scaling --help (from $outside, outside the checkout)" \
  "cd $q_outside && python -m sweeps.scaling --help" '^usage:'
# Each checkout's .venv holds its own editable install (scripts/env.sh): it must be this checkout's.
check "outside the checkout, 'import sweeps' is this checkout's" \
  "cd $q_outside && found=\"\$(python -c 'import sweeps; print(sweeps.__file__)')\" &&
   { [ \"\$found\" = $q_init ] ||
     { echo \"imports \$found: .venv's editable install points at another checkout;\"
       echo \"run \\\`source scripts/env.sh\\\` (or bash scripts/test.sh) here to re-point it\"; false; }; }"

# The study's closing hint prints `<checkout>/.venv/bin/mlflow ui ...`: it must run as printed in a
# new shell, with nothing activated.
q_mlflow="$(printf '%q' "$REPO_ROOT/.venv/bin/mlflow")"
if output="$(env -i HOME="$HOME" PATH=/usr/local/bin:/usr/bin:/bin bash --noprofile --norc -c "$q_mlflow --version" 2>&1)"; then
  echo "ok    $REPO_ROOT/.venv/bin/mlflow as printed, nothing activated: $(printf '%s\n' "$output" | grep -m1 version)"
else
  echo "FAIL  $REPO_ROOT/.venv/bin/mlflow --version in a clean shell:" >&2
  printf '%s\n' "$output" | tail -n 15 | sed 's/^/      /' >&2
  failures=$((failures + 1))
fi

if [ "$failures" -gt 0 ]; then
  echo "check_activation: $failures check(s) failed" >&2
  exit 1
fi
echo "check_activation: \`$ACTIVATE\` works in a clean shell"
