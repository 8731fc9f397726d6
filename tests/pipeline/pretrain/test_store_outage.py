"""A storage bucket that stops answering mid-run (pipeline.pretrain.store_outage): recognised from the
error Ray Train ends with, waited for with growing pauses, and a longer outage said in one line; the
checkpoints a resume leaves beyond --keep-checkpoints removed. The whole run through an outage, which
ends in the same loss as an uninterrupted one, is the cluster rehearsal's "cut mid-upload" stage."""

from __future__ import annotations

import threading
import time

import pytest

from cluster.rehearsal.fault_proxy import fault_proxy
from pipeline.cli.errors import UserError
from pipeline.pretrain.store_outage import is_store_outage, prune_checkpoints, wait_for_store

# What Ray Train 2.60 ended a run with when the rehearsal's store was cut for 70 s.
CONTROLLER_ERROR = (
    "Training failed due to controller error:\nWhen initiating multiple part upload for key "
    "'runs/outage/checkpoint_manager_snapshot.json' in bucket 'audioscale-data': AWS Error NETWORK_CONNECTION "
    "during CreateMultipartUpload operation: curlCode: 7, Could not connect to server"
)


def test_the_errors_a_store_outage_ends_a_run_with_are_recognised_and_others_are_not():
    assert is_store_outage(RuntimeError(CONTROLLER_ERROR))
    try:
        try:
            raise OSError("AWS Error UNKNOWN (HTTP status 503) during PutObject operation")
        except OSError as inner:
            raise RuntimeError("worker group failed") from inner
    except RuntimeError as chained:
        assert is_store_outage(chained)
    assert not is_store_outage(OSError("AWS Error ACCESS_DENIED during PutObject operation"))  # waiting fixes nothing
    assert not is_store_outage(ValueError("the loss became NaN"))


def test_the_store_is_waited_for_until_it_answers_and_a_longer_outage_is_one_line(bucket_env):
    with fault_proxy(bucket_env.port) as proxy:
        uri = bucket_env.uri("runs", port=proxy.port)
        proxy.cut()
        threading.Timer(5.0, proxy.resume).start()
        said: list[str] = []
        waited = wait_for_store(uri, limit_s=60, last_step=12, say=said.append)
        assert 5.0 <= waited < 20.0
        proxy.cut()
        started = time.monotonic()
        with pytest.raises(UserError) as refused:
            wait_for_store(uri, limit_s=4, last_step=12)
        assert time.monotonic() - started < 30
    message = str(refused.value)
    assert "did not answer for" in message and "training had reached step 12" in message
    assert "the same command resumes from the newest whole one" in message and "\n" not in message


def test_checkpoints_beyond_keep_are_removed_oldest_first(tmp_path):
    run = tmp_path / "storage" / "run"
    for step in (4, 8, 12, 16):
        (run / f"checkpoint_step_{step:08d}").mkdir(parents=True)
        (run / f"checkpoint_step_{step:08d}" / "model.json").write_text("{}")
    removed = prune_checkpoints(str(tmp_path / "storage"), "run", keep=2)
    assert [path.rpartition("/")[2] for path in removed] == ["checkpoint_step_00000004", "checkpoint_step_00000008"]
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint_step_00000012", "checkpoint_step_00000016"]
