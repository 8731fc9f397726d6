"""The faults a bucket brings, each met before any work: wrong credentials, a bucket that does not
exist, an endpoint that is down, a read-only policy. Each one is a real command against the real
store, expected to end at once with exit code 2 and one line that names the flag, the URI and what
to do (`pipeline.bucket_check`), not a traceback from a Ray worker.
"""

from __future__ import annotations

from cluster.rehearsal.commands import Outcome
from cluster.rehearsal.object_store import free_port
from cluster.rehearsal.stages import Rehearsal, expect, pretrain_argv

# The preflight's budget: pyarrow retries a refused connection for about 6 s before it gives up.
PREFLIGHT_LIMIT_S = 30.0


def _refused(outcome: Outcome, *, names: str, says: str) -> str:
    errors = [line for line in outcome.output.splitlines() if "error:" in line]
    expect(outcome.returncode == 2, f"`{outcome.shell}` exited {outcome.returncode}, not 2:\n{outcome.output[-1500:]}")
    expect(len(errors) == 1 and names in errors[0] and says in errors[0], f"unclear refusal: {errors}")
    expect("Traceback" not in outcome.output, "a traceback instead of one line")
    expect(outcome.seconds < PREFLIGHT_LIMIT_S, f"refused only after {outcome.seconds:.0f} s")
    return errors[0]


def bucket_faults(rehearsal: Rehearsal) -> dict:
    store = rehearsal.store
    argv = pretrain_argv(rehearsal, "faults")
    cases = {}
    wrong = rehearsal.run("fault-credentials", argv, AWS_SECRET_ACCESS_KEY="not-the-key")
    cases["wrong credentials"] = _refused(wrong, names="--storage-path", says="refused these credentials")
    missing = list(argv)
    missing[missing.index("--storage-path") + 1] = store.uri("ray_results", bucket="no-such-bucket")
    outcome = rehearsal.run("fault-no-bucket", missing)
    cases["missing bucket"] = _refused(outcome, names="no-such-bucket", says="does not exist")
    down = list(argv)
    down[down.index("--storage-path") + 1] = store.uri("ray_results", port=free_port())
    outcome = rehearsal.run("fault-endpoint-down", down)
    cases["endpoint down"] = _refused(outcome, names="--storage-path", says="cannot reach the store")
    reader = store.read_only_user("rehearsal-reader")
    outcome = rehearsal.run("fault-read-only", argv, **reader.env())
    cases["read-only policy"] = _refused(outcome, names="--storage-path", says="not write")
    return cases
