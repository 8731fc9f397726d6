"""Spoken language, synthetic: espeak-ng reading random words in 9 languages.

Held out: voice variants (train, valid and test use disjoint espeak-ng variants) and words (each
word-list entry belongs to one split). Speaking rate and pitch vary per clip.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.corpus.sources import espeak
from pipeline.corpus.sources.holdout import (
    TEST_VOICE_VARIANTS,
    TRAIN_VOICE_VARIANTS,
    VALID_VOICE_VARIANTS,
)
from pipeline.corpus.tasks.clip_shaping import shape_clip, trim_leading_silence
from pipeline.corpus.tasks.hear_writer import LabeledClip, TaskBuild, TaskSpec
from pipeline.task_format.reader import LANGUAGE_LABEL_KIND

LANGUAGES = tuple(sorted(espeak.LANGUAGES))
SAMPLE_DURATION_S = 4.0
VARIANTS_BY_SPLIT = {"train": TRAIN_VOICE_VARIANTS, "valid": VALID_VOICE_VARIANTS, "test": TEST_VOICE_VARIANTS}
CLIPS_PER_LANGUAGE = {"train": 120, "valid": 20, "test": 40}
TINY_CLIPS_PER_LANGUAGE = {"train": 6, "valid": 2, "test": 3}

SPEC = TaskSpec(
    name="language_synthetic",
    labels=LANGUAGES,
    label_kind=LANGUAGE_LABEL_KIND,
    sample_duration_s=SAMPLE_DURATION_S,
    held_out="voice variant; words",
    description="Spoken language of espeak-ng speech (random words from Debian word lists) in 9 languages.",
    notes="Synthetic speech: the same formant synthesizer for all languages; test voice variants and words are unseen in train.",
)


def plan_requests(rng: np.random.Generator, *, tiny: bool) -> list[tuple[str, str, espeak.SpeechRequest]]:
    """(split, language, request) for every clip, in a fixed order."""
    per_language = TINY_CLIPS_PER_LANGUAGE if tiny else CLIPS_PER_LANGUAGE
    plan = []
    for split, count in per_language.items():
        for language in LANGUAGES:
            for _ in range(count):
                request = espeak.SpeechRequest(
                    text=espeak.random_sentence(rng, language, split, n_words=int(rng.integers(3, 7))),
                    voice=espeak.LANGUAGES[language][0],
                    variant=str(rng.choice(VARIANTS_BY_SPLIT[split])),
                    speed_wpm=int(rng.integers(140, 200)),
                    pitch=int(rng.integers(25, 75)),
                )
                plan.append((split, language, request))
    return plan


def build(*, seed: int, tiny: bool, work_dir: Path) -> TaskBuild:
    plan = plan_requests(np.random.default_rng(seed), tiny=tiny)
    waves = espeak.synthesize_all([request for _, _, request in plan], work_dir)
    clips = [
        LabeledClip(
            split=split,
            label=language,
            wave=shape_clip(trim_leading_silence(wave), SAMPLE_DURATION_S),
            source={
                "voice": request.voice,
                "variant": request.variant,
                "text": request.text,
                "speed_wpm": request.speed_wpm,
                "pitch": request.pitch,
            },
        )
        for (split, language, request), wave in zip(plan, waves)
    ]
    return TaskBuild(spec=SPEC, clips=clips)
