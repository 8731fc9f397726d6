"""Spoken language from real recordings: the asterisk prompts in en, es, fr, it, ru.

Held out: prompt text (train, valid and test use disjoint prompt texts) and, where a language has
a second speaker (it: Menardi, es: Colombian, fr: Armelle), that speaker is only in test.
Confound: in train each language is one speaker (en and es share Allison), so a probe can partly
identify the speaker instead of the language; the second-speaker test clips measure how much
of the score is really language.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.corpus.sources.asterisk import prepare_asterisk_prompts
from pipeline.corpus.sources.audio_io import decode_or_reason
from pipeline.corpus.sources.holdout import LANGUAGE_SECOND_SPEAKERS, prompt_split
from pipeline.corpus.tasks.clip_shaping import seconds_to_samples, shape_clip
from pipeline.corpus.tasks.hear_writer import LabeledClip, TaskBuild, TaskSpec
from pipeline.session.worker_pool import map_ordered
from pipeline.task_format.reader import LANGUAGE_LABEL_KIND

LANGUAGES = ("en", "es", "fr", "it", "ru")
SAMPLE_DURATION_S = 4.0
MIN_SPEECH_S = 0.4
NON_SPEECH_PROMPTS = {"beep", "beeperr", "ascending-2tone", "descending-2tone"}  # tones, same in every language
TINY_CLIPS_PER_LANGUAGE = {"train": 10, "valid": 3, "test": 5}

SPEC = TaskSpec(
    name="language_real",
    labels=LANGUAGES,
    label_kind=LANGUAGE_LABEL_KIND,
    sample_duration_s=SAMPLE_DURATION_S,
    held_out="prompt text; second speakers",
    description="Spoken language (en/es/fr/it/ru) of real studio telephone prompts (asterisk sound packages).",
    notes=(
        "Confound: train has one speaker per language (en and es share one speaker, Allison), so part of "
        "the score can come from speaker identity. Test prompts have texts absent from train, and the test "
        "split adds second speakers never seen in train (it: Menardi, es: Colombian speaker, fr: Armelle; "
        "the last two are GSM-coded); their accuracy is the speaker-independent part."
    ),
)


def assign_split(speaker: str, prompt_id: str) -> str | None:
    """Main speakers follow the prompt-text split; second speakers are test-only, on non-train texts."""
    split = prompt_split(prompt_id)
    if speaker in LANGUAGE_SECOND_SPEAKERS:
        return "test" if split != "train" else None
    return split


def build(*, seed: int, tiny: bool, work_dir: Path) -> TaskBuild:
    rng = np.random.default_rng(seed)
    candidates = []
    for clip in prepare_asterisk_prompts():
        if clip.info["prompt_id"] in NON_SPEECH_PROMPTS:
            continue
        split = assign_split(clip.group, clip.info["prompt_id"])
        if split is not None:
            candidates.append((split, clip))
    if tiny:
        chosen = []
        for split, per_language in TINY_CLIPS_PER_LANGUAGE.items():
            for language in LANGUAGES:
                pool = [item for item in candidates if item[0] == split and item[1].info["language"] == language]
                chosen += [
                    pool[int(index)]
                    for index in sorted(rng.choice(len(pool), size=min(per_language, len(pool)), replace=False))
                ]
        candidates = chosen
    decoded = map_ordered(lambda item: decode_or_reason(item[1].path), candidates)
    clips, skipped = [], []
    for (split, clip), (wave, reason) in zip(candidates, decoded):
        if wave is None:
            skipped.append({"path": str(clip.path), "reason": reason})
            continue
        if len(wave) < seconds_to_samples(MIN_SPEECH_S):  # single syllables and clicks: too short to tell
            continue
        clips.append(
            LabeledClip(
                split=split,
                label=clip.info["language"],
                wave=shape_clip(wave, SAMPLE_DURATION_S),
                source={"speaker": clip.group, "prompt_id": clip.info["prompt_id"], "package": clip.package},
            )
        )
    return TaskBuild(spec=SPEC, clips=clips, skipped=skipped)
