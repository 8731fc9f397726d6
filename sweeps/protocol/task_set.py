"""The task set a profile's Q is defined over, and how a study's task folder is held to it.

The RankMe study's Q is "the average HEAR score across these 16 tasks" (paper Sec. III-D): HEAR
2021's 17 scene-based tasks without Beehive ("due to long utterance duration and low sample
count", following its ref. [48]), named in the paper by abbreviation. `PAPER_TASKS` maps each
HEAR task folder (the names HEAR's own `hear-eval` tasks carry) to the paper's abbreviation. A
paper-profile study on a folder holding other tasks measures some other Q: it is refused before
any training unless the user accepts the difference, and the choice is logged with the study.
The CPU default profile declares no set: its tasks are the embedded ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Paper Sec. III-D: "SPC-5, SPC-F, VL, LiCt, VI, CD, BJ, GZ-Gen, GZM/S, Mri-T, Mri-S, NS-5, NS-50,
# E50, Gun, and F50k"; Beehive (beehive_states_fold0/1-v2-full) excluded.
PAPER_TASKS = {
    "speech_commands-v0.0.2-5h": "SPC-5",
    "speech_commands-v0.0.2-full": "SPC-F",
    "vox_lingua_top10-hear2021-full": "VL",
    "libricount-v1.0.0-hear2021-full": "LiCt",
    "vocal_imitation-v1.1.3-full": "VI",
    "tfds_crema_d-1.0.0-full": "CD",
    "beijing_opera-v1.0-hear2021-full": "BJ",
    "tfds_gtzan-1.0.0-full": "GZ-Gen",
    "tfds_gtzan_music_speech-1.0.0-full": "GZM/S",
    "mridangam_tonic-v1.5-full": "Mri-T",
    "mridangam_stroke-v1.5-full": "Mri-S",
    "nsynth_pitch-v2.2.3-5h": "NS-5",
    "nsynth_pitch-v2.2.3-50h": "NS-50",
    "esc50-v2.0.0-full": "E50",
    "gunshot_triangulation-v1.0-full": "Gun",
    "fsd50k-v1.0-full": "F50k",
}
TASK_SETS = {"paper": tuple(PAPER_TASKS)}  # profile -> declared task folders; absent: any


@dataclass(frozen=True, kw_only=True)
class TaskSetCheck:
    """How a study's task folder compares with its profile's declared set."""

    declared: tuple[str, ...] | None  # None: the profile declares no set
    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()

    @property
    def matches(self) -> bool:
        return self.declared is None or not (self.missing or self.extra)

    def describe(self) -> str:
        """One line for the study run and the terminal."""
        if self.declared is None:
            return "the profile declares no task set"
        if self.matches:
            return f"the paper's {len(self.declared)} HEAR scene tasks (Sec. III-D)"
        parts = [f"missing {len(self.missing)} of the paper's {len(self.declared)}: {', '.join(self.missing)}"]
        if self.extra:
            parts.append(f"{len(self.extra)} not in the paper's set: {', '.join(self.extra)}")
        return "; ".join(parts)


def compare_task_set(profile: str, present: Iterable[str]) -> TaskSetCheck:
    declared = TASK_SETS.get(profile)
    if declared is None:
        return TaskSetCheck(declared=None)
    names = set(present)
    return TaskSetCheck(
        declared=declared,
        missing=tuple(name for name in declared if name not in names),
        extra=tuple(sorted(names - set(declared))),
    )


def check_task_set(profile: str, present: Iterable[str], *, accept_difference: bool, where: str) -> TaskSetCheck:
    """The comparison; a ValueError listing the difference unless it matches or is accepted."""
    check = compare_task_set(profile, present)
    if not check.matches and not accept_difference:
        raise ValueError(
            f"--profile {profile}: Q is defined over the paper's {len(check.declared)} HEAR scene tasks (Sec. III-D), "
            f"but the task folder ({where}) differs: {check.describe()}; point --tasks at a folder of the HEAR 2021 tasks, or pass "
            "--accept-task-set to run on these tasks (the study records the difference)"
        )
    return check
