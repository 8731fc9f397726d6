"""The paper profile's Q is over the 16 HEAR scene tasks the paper names (Sec. III-D), Beehive excluded."""

from __future__ import annotations

import pytest

from sweeps.protocol.task_set import PAPER_TASKS, TASK_SETS, check_task_set, compare_task_set


def test_the_paper_task_set_is_the_papers_sixteen_in_its_order():
    # Sec. III-D, verbatim order of the abbreviations.
    paper = "SPC-5, SPC-F, VL, LiCt, VI, CD, BJ, GZ-Gen, GZM/S, Mri-T, Mri-S, NS-5, NS-50, E50, Gun, F50k"
    assert ", ".join(PAPER_TASKS.values()) == paper
    assert len(PAPER_TASKS) == 16 and TASK_SETS["paper"] == tuple(PAPER_TASKS)
    assert not any("beehive" in name for name in PAPER_TASKS)  # "we exclude the 'Beehive' task"
    assert "cpu_default" not in TASK_SETS


def test_a_folder_with_exactly_the_papers_tasks_matches_in_any_order():
    check = compare_task_set("paper", reversed(list(PAPER_TASKS)))
    assert check.matches and check.describe() == "the paper's 16 HEAR scene tasks (Sec. III-D)"


def test_a_difference_is_listed_and_refused_unless_accepted():
    present = [*list(PAPER_TASKS)[:-1], "beehive_states_fold0-v2-full"]
    with pytest.raises(ValueError) as refused:
        check_task_set("paper", present, accept_difference=False, where="--tasks /data/hear")
    message = str(refused.value)
    assert "the task folder (--tasks /data/hear) differs: missing 1 of the paper's 16: fsd50k-v1.0-full; " in message
    assert "1 not in the paper's set: beehive_states_fold0-v2-full; point --tasks" in message
    assert "--accept-task-set" in message
    accepted = check_task_set("paper", present, accept_difference=True, where="--tasks /data/hear")
    assert accepted.missing == ("fsd50k-v1.0-full",) and accepted.extra == ("beehive_states_fold0-v2-full",)
