"""A slow HEAR module shows what it is doing early and then at a steady pace by the clock.

Before, the only progress line came when a whole task had been embedded and probed: a module at
2 s a call was silent for ~11 minutes (the RankMe pool, then the first task). Here a module at
0.3 s a call (tests/support/toy_slow_hear_module.py) is scored with lines due after 1 s and then
every 1 s (the command's defaults: 10 s, then every minute), and the lines are timed as they come.
"""

from __future__ import annotations

import re
import time

import pytest

from pipeline.evaluate import embedding_progress
from pipeline.evaluate.probes.linear import LinearProbeConfig
from pipeline.interop.hear_module import load_hear_module
from pipeline.interop.hear_module_run import evaluate_hear_module
from pipeline.rankme.pool import select_pool
from tests.support import toy_slow_hear_module
from tests.support.hear_task_fixtures import build_tiny_tasks
from tests.support.waveform_pool_fixtures import CROP_FRAMES, write_audio_shards

COUNT = re.compile(r"(\d+) of (\d+) sounds")


def test_progress_lines_come_by_time_with_what_runs_how_far_and_how_long_is_left(tmp_path):
    tasks = build_tiny_tasks(tmp_path / "tasks", clips_per_class={"train": 8, "valid": 4, "test": 4})
    shards, _ = write_audio_shards(tmp_path / "pool")
    pool = select_pool(shards, crop_frames=CROP_FRAMES)  # 20 crops: 2 calls of 16 sounds at most
    hear = load_hear_module("tests.support.toy_slow_hear_module")
    lines: list[tuple[float, str]] = []
    started = time.monotonic()
    result = evaluate_hear_module(
        hear, tasks_dir=str(tasks), pool=pool, task_rankme_n=10, seeds=1, probe_training=LinearProbeConfig(),
        progress=lambda line: lines.append((time.monotonic() - started, line)),
        progress_first_after_s=1.0, progress_every_s=1.0,
    )  # fmt: skip
    assert set(result.task_scores) == {"tones", "mixtures"}
    counted = [(at, line) for at, line in lines if COUNT.search(line)]
    first_score = next(at for at, line in lines if "tones: top1_acc" in line or "mixtures: mAP" in line)
    # The first counted line comes by time, after a few calls and before any task has finished.
    assert counted and 1.0 <= counted[0][0] < first_score, lines
    done, total = map(int, COUNT.search(counted[0][1]).groups())
    assert 0 < done < total == pool.n + 3 * 16 + 2 * 16  # the pool's crops, then every clip of both tasks
    # What runs (the module and its stage), how far, and how long is left.
    assert "toy_slow_hear_module" in counted[0][1] and "left" in counted[0][1], counted[0][1]
    assert re.search(r"RankMe pool|task (tones|mixtures)", counted[0][1]), counted[0][1]
    # Steady by the clock, not one line per call: ~1 s apart, far fewer lines than calls.
    calls = 2 + 4 + 3  # pool 20, tones 24/12/12, mixtures 16/8/8 sounds, in calls of 16 at most
    assert len(counted) < calls / 2, lines
    assert all(later - earlier >= 0.9 for (earlier, _), (later, _) in zip(counted, counted[1:])), lines
    # A line says what starts right away, before the first call returns.
    assert lines[0][0] < toy_slow_hear_module.CALL_S and "toy_slow_hear_module" in lines[0][1], lines


def test_the_commands_first_line_is_due_within_15_s_and_then_every_minute():
    assert embedding_progress.FIRST_LINE_AFTER_S <= 15
    assert embedding_progress.EVERY_S == pytest.approx(60)
