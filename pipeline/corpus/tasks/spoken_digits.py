"""Spoken digits 0-9: espeak-ng English voices for training, held-out voices plus real recordings for test.

Held out: voice variants (disjoint per split); the test split adds the ten real recorded digits of
the asterisk English prompts (speaker Allison), so part of the test is real speech.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.corpus.sources import espeak
from pipeline.corpus.sources.asterisk import ASTERISK_SOUNDS_DIR
from pipeline.corpus.sources.audio_io import decode_or_reason
from pipeline.corpus.sources.holdout import (
    TEST_VOICE_VARIANTS,
    TRAIN_VOICE_VARIANTS,
    VALID_VOICE_VARIANTS,
)
from pipeline.corpus.tasks.clip_shaping import shape_clip, trim_leading_silence
from pipeline.corpus.tasks.hear_writer import LabeledClip, TaskBuild, TaskSpec

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
LABELS = tuple(str(digit) for digit in range(10))
ENGLISH_VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-029", "en-us-nyc")
REAL_DIGITS_DIR = ASTERISK_SOUNDS_DIR / "en_US_f_Allison" / "digits"
SAMPLE_DURATION_S = 1.5
VARIANTS_BY_SPLIT = {"train": TRAIN_VOICE_VARIANTS, "valid": VALID_VOICE_VARIANTS, "test": TEST_VOICE_VARIANTS}
CLIPS_PER_DIGIT = {"train": 100, "valid": 20, "test": 40}
TINY_CLIPS_PER_DIGIT = {"train": 5, "valid": 2, "test": 2}

SPEC = TaskSpec(
    name="spoken_digits",
    labels=LABELS,
    sample_duration_s=SAMPLE_DURATION_S,
    held_out="voice variant; real speaker",
    description="Isolated English digits 0-9: espeak-ng voices in train; test adds real recorded digits (asterisk, Allison).",
    notes="Only 10 real recordings exist (one per digit), all in test; the rest of test is held-out synthetic voices.",
)


def build(*, seed: int, tiny: bool, work_dir: Path) -> TaskBuild:
    rng = np.random.default_rng(seed)
    plan = []
    for split, count in (TINY_CLIPS_PER_DIGIT if tiny else CLIPS_PER_DIGIT).items():
        for digit, word in enumerate(DIGIT_WORDS):
            for _ in range(count):
                plan.append(
                    (
                        split,
                        str(digit),
                        espeak.SpeechRequest(
                            text=word,
                            voice=str(rng.choice(ENGLISH_VOICES)),
                            variant=str(rng.choice(VARIANTS_BY_SPLIT[split])),
                            speed_wpm=int(rng.integers(120, 200)),
                            pitch=int(rng.integers(20, 80)),
                        ),
                    )
                )
    waves = espeak.synthesize_all([request for _, _, request in plan], work_dir)
    clips = [
        LabeledClip(
            split=split,
            label=label,
            wave=shape_clip(trim_leading_silence(wave), SAMPLE_DURATION_S),
            source={
                "voice": request.voice,
                "variant": request.variant,
                "speed_wpm": request.speed_wpm,
                "pitch": request.pitch,
                "speaker": f"espeak:{request.voice}+{request.variant}",
            },
        )
        for (split, label, request), wave in zip(plan, waves)
    ]
    for digit in range(10):
        path = REAL_DIGITS_DIR / f"{digit}.wav"
        wave, reason = decode_or_reason(path)
        if wave is None:
            raise FileNotFoundError(f"real digit recording {path}: {reason}; reinstall asterisk-core-sounds-en-wav")
        wave = trim_leading_silence(wave)
        clips.append(
            LabeledClip(
                split="test",
                label=str(digit),
                wave=shape_clip(wave, SAMPLE_DURATION_S),
                source={"speaker": "allison", "recording": str(path)},
            )
        )
    return TaskBuild(spec=SPEC, clips=clips)
