"""Drum type (kick, snare, tom, hi-hat, cymbal, hand percussion) from real Hydrogen drum kits.

Held out: whole kits. Valid and test kits are fixed in `holdout` and never appear in train.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.corpus.sources.audio_io import decode_or_reason
from pipeline.corpus.sources.holdout import DRUM_TEST_KITS, DRUM_VALID_KITS
from pipeline.corpus.sources.hydrogen import DRUM_CLASSES, prepare_hydrogen_drums
from pipeline.corpus.tasks.clip_shaping import shape_clip
from pipeline.corpus.tasks.hear_writer import LabeledClip, TaskBuild, TaskSpec
from pipeline.session.worker_pool import map_ordered

SAMPLE_DURATION_S = 2.0
TINY_CLIPS_PER_CLASS = 3

SPEC = TaskSpec(
    name="drum_type",
    labels=DRUM_CLASSES,
    sample_duration_s=SAMPLE_DURATION_S,
    held_out="drum kit",
    description="Drum type of single real drum hits from the 14 Hydrogen drum kits (hydrogen-drumkits).",
    notes=(
        "Small: every labelled sample of the kits (about 620 clips). Test kits: "
        + ", ".join(DRUM_TEST_KITS)
        + "; valid kits: "
        + ", ".join(DRUM_VALID_KITS)
        + "."
    ),
)


def kit_split(kit: str) -> str:
    return "test" if kit in DRUM_TEST_KITS else "valid" if kit in DRUM_VALID_KITS else "train"


def build(*, seed: int, tiny: bool, work_dir: Path) -> TaskBuild:
    rng = np.random.default_rng(seed)
    candidates = [(kit_split(clip.group), clip) for clip in prepare_hydrogen_drums()]
    if tiny:
        chosen = []
        for split in ("train", "valid", "test"):
            for label in DRUM_CLASSES:
                pool = [item for item in candidates if item[0] == split and item[1].info["drum_class"] == label]
                picks = rng.choice(len(pool), size=min(TINY_CLIPS_PER_CLASS, len(pool)), replace=False) if pool else []
                chosen += [pool[int(index)] for index in sorted(picks)]
        candidates = chosen
    decoded = map_ordered(lambda item: decode_or_reason(item[1].path), candidates)
    clips = [
        LabeledClip(
            split=split,
            label=clip.info["drum_class"],
            wave=shape_clip(wave, SAMPLE_DURATION_S),
            source={"kit": clip.group, "instrument": clip.info["instrument"], "sample": clip.path.name},
        )
        for (split, clip), (wave, _) in zip(candidates, decoded)
        if wave is not None
    ]
    skipped = [
        {"path": str(clip.path), "reason": reason} for (_, clip), (_, reason) in zip(candidates, decoded) if reason
    ]
    return TaskBuild(spec=SPEC, clips=clips, skipped=skipped)
