"""The faults a bucket brings, each met before any work: wrong credentials, a bucket that does not
exist, an endpoint that is down, a read-only policy. Each one is a real command against the real
store, expected to end at once with exit code 2 and one line that names the flag, the URI and what
to do (`pipeline.storage.bucket_check`), not a traceback from a Ray worker.
"""

from __future__ import annotations

import time

from cluster.rehearsal.commands import Outcome
from cluster.rehearsal.fault_proxy import fault_proxy
from cluster.rehearsal.object_store import free_port
from cluster.rehearsal.stages import RUNS_PATH, Rehearsal, checkpoints_in_bucket, expect, pretrain_argv, read_json

# The preflight's budget: pyarrow retries a refused connection for about 6 s before it gives up, and a
# command's start (imports, argument checks) takes ~5 s idle; a loaded 2-core machine once needed 45 s
# for a correct refusal. Generous on purpose: the check is that the refusal comes before any work (no
# Ray start, no training step), which its one line and exit code already show, not how fast the machine is.
PREFLIGHT_LIMIT_S = 180.0


def _refused(outcome: Outcome, *, names: str, says: str) -> str:
    errors = [line for line in outcome.output.splitlines() if "error:" in line]
    expect(outcome.returncode == 2, f"`{outcome.shell}` exited {outcome.returncode}, not 2:\n{outcome.output[-1500:]}")
    expect(len(errors) == 1 and names in errors[0] and says in errors[0], f"unclear refusal: {errors}")
    expect("Traceback" not in outcome.output, "a traceback instead of one line")
    expect(outcome.seconds < PREFLIGHT_LIMIT_S, f"refused only after {outcome.seconds:.0f} s")
    return errors[0]


def bucket_faults(rehearsal: Rehearsal) -> dict:
    """The four refusals, started together: each is a command's start-up and one preflight, independent of
    the others (their own users, buckets and ports), so they need not wait for each other."""
    store = rehearsal.store
    argv = pretrain_argv(rehearsal, "faults")
    missing = list(argv)
    missing[missing.index("--storage-path") + 1] = store.uri("ray_results", bucket="no-such-bucket")
    down = list(argv)
    down[down.index("--storage-path") + 1] = store.uri("ray_results", port=free_port())
    reader = store.read_only_user("rehearsal-reader")
    # case: (log name, argv, extra environment, what the line must name, what it must say)
    cases = {
        "wrong credentials": ("fault-credentials", argv, {"AWS_SECRET_ACCESS_KEY": "not-the-key"},
                              "--storage-path", "refused these credentials"),
        "missing bucket": ("fault-no-bucket", missing, {}, "no-such-bucket", "does not exist"),
        "endpoint down": ("fault-endpoint-down", down, {}, "--storage-path", "cannot reach the store"),
        "read-only policy": ("fault-read-only", argv, reader.env(), "--storage-path", "not write"),
    }  # fmt: skip
    started = {case: rehearsal.start(name, command, **env) for case, (name, command, env, *_) in cases.items()}
    outcomes = {case: running.finish() for case, running in started.items()}  # all ended before any verdict
    return {case: _refused(outcomes[case], names=names, says=says) for case, (*_, names, says) in cases.items()}


# Uploads slowed so that one checkpoint (~1.5 MB for the debug model) takes seconds to copy, and the
# cut surely falls inside it. The store then stays away until the run says it waits for it (so the
# outage certainly reached the run: a fixed 40 s outage once ended before its next storage request),
# and OUTAGE_TAIL_S more; a run that has not said so after OUTAGE_LIMIT_S fails the stage.
CUT_THROTTLE_BYTES_PER_S = 200 * 1024
OUTAGE_LIMIT_S, OUTAGE_TAIL_S = 240.0, 10.0


def store_cut_mid_upload(rehearsal: Rehearsal) -> dict:
    """Checkpoints go through a fault proxy that drops the store while step 6's checkpoint is being
    copied and keeps it away until the driver waits for it, then lets it back with everything it had.
    The run must name any checkpoint that did not arrive whole and never offer one, resume from the
    newest whole checkpoint, end with the loss of the uninterrupted run of the same command, and keep
    --keep-checkpoints (2)."""
    store = rehearsal.store
    with fault_proxy(store.port) as proxy:
        argv = pretrain_argv(rehearsal, "cut")
        argv[argv.index("--storage-path") + 1] = store.uri(RUNS_PATH, port=proxy.port)
        proxy.throttle(CUT_THROTTLE_BYTES_PER_S)
        running = rehearsal.start("fault-cut-mid-upload", argv)
        cut_at, cut_transfers, outage_s = None, 0, 0.0
        while running.process.poll() is None and cut_at is None:
            # Step 6's copy has begun (a first object of it is there) and a transfer is moving bytes now:
            # Ray Train copies file by file, and a cut in the gap between two files cut nothing.
            started_copy = any("checkpoint_step_00000006/" in key for key in store.keys(f"{RUNS_PATH}/cut/"))
            if started_copy and proxy.busy():
                cut_transfers = proxy.cut()
                cut_at = time.monotonic() - running.started
                outage_s = _hold_until_said(running, "stopped answering", limit_s=OUTAGE_LIMIT_S) + OUTAGE_TAIL_S
                time.sleep(OUTAGE_TAIL_S)
                proxy.throttle(None)
                proxy.resume()
            time.sleep(0.1)
        outcome = running.finish()
    expect(cut_at is not None, "the run ended before step 6's checkpoint was copied: nothing was cut")
    expect(cut_transfers > 0, "the cut fell between transfers (no connection was moving bytes): the fault did not land")
    said = _check_nothing_incomplete_offered(rehearsal, outcome)
    waited = outcome.last_line("stopped answering")
    expect(waited != "", f"no storage request of the run fell in the {outage_s:.0f} s outage: nothing was tested")
    expect(
        outcome.returncode == 0,
        f"the run did not survive the outage (exit {outcome.returncode}):\n{outcome.output[-2500:]}",
    )
    uninterrupted = (rehearsal.work / "logs" / "pretrain-uninterrupted.log").read_text()
    same_loss = _final_loss(outcome.output) == _final_loss(uninterrupted)
    expect(
        same_loss, f"final loss {_final_loss(outcome.output)} after the outage, {_final_loss(uninterrupted)} without"
    )
    kept = sorted(folder.rpartition("/")[2] for folder in checkpoints_in_bucket(rehearsal, "cut"))
    expect(len(kept) == 2, f"--keep-checkpoints 2, but the bucket holds {kept}")
    return {"cut_after_s": round(cut_at, 1), "transfers_cut": cut_transfers, "outage_s": round(outage_s, 1),
            "seconds": outcome.seconds, "said": said[-1] if said else "", "waited": waited[:120],
            "final_loss": _final_loss(outcome.output), "kept": kept}  # fmt: skip


def _check_nothing_incomplete_offered(rehearsal: Rehearsal, outcome) -> list[str]:
    """Whichever file the cut fell in: every checkpoint folder left in the bucket is whole, or the run named
    it as not whole; the one it offers at the end is whole. The lines that named one."""
    broken = [folder for folder, files in checkpoints_in_bucket(rehearsal, "cut").items()
              if not _whole(rehearsal, folder, files)]  # fmt: skip
    said = [line for line in outcome.output.splitlines() if "did not reach --storage-path whole" in line]
    unsaid = [folder for folder in broken if not any(folder.rpartition("/")[2] in line for line in said)]
    expect(not unsaid, f"incomplete checkpoints in the bucket that the run did not name: {unsaid}")
    offered = outcome.last_line("checkpoint: s3://")
    expect(not any(folder.rpartition("/")[2] in offered for folder in broken), f"an incomplete one offered: {offered}")
    return said


def _whole(rehearsal: Rehearsal, folder: str, files: dict[str, int]) -> bool:
    """model.json there, and every file whose sha256 it records (an S3 object is whole or absent)."""
    if "model.json" not in files:
        return False
    return set(read_json(rehearsal, f"{folder}/model.json").get("sha256", {})) <= set(files)


def _hold_until_said(running, words: str, *, limit_s: float) -> float:
    """Seconds until the running command's log holds `words` (or it ended, or `limit_s` passed)."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s and running.process.poll() is None:
        if words in running.log_path.read_text(errors="replace"):
            break
        time.sleep(0.5)
    return time.monotonic() - started


def _final_loss(output: str) -> str:
    lines = [line for line in output.splitlines() if "final loss" in line]
    return lines[-1].rpartition("final loss")[2].strip() if lines else "none"
