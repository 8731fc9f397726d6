"""Speaker count: mixtures of 1-4 real voices, each speaking one utterance somewhere in a 4 s clip.

Held out: speakers. Test mixes only the voices in `holdout.SPEAKER_COUNT_TEST_SPEAKERS`; train and
valid mix the other voices (valid on utterances train does not use). Voices: the asterisk prompt
speakers (Allison's en and es prompts are one voice) and the two main voices of each Fish Fillets
dubbing (cs, nl), 11 distinct people.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.corpus.sources.asterisk import prepare_asterisk_prompts
from pipeline.corpus.sources.audio_io import decode_or_reason
from pipeline.corpus.sources.fillets import prepare_fillets_dialogue
from pipeline.corpus.sources.holdout import SPEAKER_COUNT_TEST_SPEAKERS
from pipeline.corpus.sources.records import SourceClip
from pipeline.corpus.tasks.clip_shaping import normalize_loudness, seconds_to_samples
from pipeline.corpus.tasks.hear_writer import LabeledClip, TaskBuild, TaskSpec
from pipeline.session.worker_pool import map_ordered

COUNTS = (1, 2, 3, 4)
SAMPLE_DURATION_S = 4.0
MIN_UTTERANCE_S = 1.2
UTTERANCES_PER_SPEAKER = 40
TINY_UTTERANCES_PER_SPEAKER = 6
VALID_FRACTION = 0.25  # of each train voice's utterances, kept for valid mixtures
MIXTURES_PER_COUNT = {"train": 250, "valid": 50, "test": 100}
TINY_MIXTURES_PER_COUNT = {"train": 5, "valid": 2, "test": 3}
GAIN_RANGE_DB = 3.0

SPEC = TaskSpec(
    name="speaker_count",
    labels=tuple(str(count) for count in COUNTS),
    sample_duration_s=SAMPLE_DURATION_S,
    held_out="speaker",
    description="Number of distinct real voices (1-4) in a 4 s mixture of utterances at random offsets.",
    notes="Test voices: "
    + ", ".join(SPEAKER_COUNT_TEST_SPEAKERS)
    + ". Utterances are short, so voices overlap only partly.",
)


def voice_clips() -> dict[str, list[SourceClip]]:
    """speaker -> utterance files, sorted."""
    by_speaker: dict[str, list[SourceClip]] = {}
    clips = prepare_asterisk_prompts()
    clips += prepare_fillets_dialogue("cs", main_voices_only=True) + prepare_fillets_dialogue(
        "nl", main_voices_only=True
    )
    for clip in clips:
        by_speaker.setdefault(clip.group, []).append(clip)
    return dict(sorted(by_speaker.items()))


def sample_utterances(
    rng: np.random.Generator, *, tiny: bool
) -> tuple[dict[str, list[tuple[SourceClip, np.ndarray]]], list[dict]]:
    """A random pool of decoded utterances (longer than MIN_UTTERANCE_S) per speaker, and the unreadable files."""
    wanted = TINY_UTTERANCES_PER_SPEAKER if tiny else UTTERANCES_PER_SPEAKER
    candidates = []
    for speaker, clips in voice_clips().items():
        # Draw twice what is needed: some prompts are single words shorter than MIN_UTTERANCE_S.
        picks = rng.choice(len(clips), size=min(2 * wanted, len(clips)), replace=False)
        candidates += [(speaker, clips[int(index)]) for index in picks]
    decoded = map_ordered(lambda item: decode_or_reason(item[1].path), candidates)
    pools: dict[str, list[tuple[SourceClip, np.ndarray]]] = {}
    skipped = []
    for (speaker, clip), (wave, reason) in zip(candidates, decoded):
        pool = pools.setdefault(speaker, [])
        if wave is None:
            skipped.append({"path": str(clip.path), "reason": reason})
        elif len(wave) >= seconds_to_samples(MIN_UTTERANCE_S) and len(pool) < wanted:
            pool.append((clip, wave))
    return pools, skipped


def split_pools(pools: dict[str, list]) -> dict[str, dict[str, list]]:
    by_split: dict[str, dict[str, list]] = {"train": {}, "valid": {}, "test": {}}
    for speaker, pool in pools.items():
        if speaker in SPEAKER_COUNT_TEST_SPEAKERS:
            by_split["test"][speaker] = pool
        else:
            n_valid = max(1, round(VALID_FRACTION * len(pool)))
            by_split["train"][speaker], by_split["valid"][speaker] = pool[n_valid:], pool[:n_valid]
    return by_split


def mix(rng: np.random.Generator, utterances: list[np.ndarray]) -> np.ndarray:
    """Each utterance (cut to the clip length) at a random offset and a random gain of +-3 dB."""
    n_samples = seconds_to_samples(SAMPLE_DURATION_S)
    mixture = np.zeros(n_samples, dtype=np.float64)
    for wave in utterances:
        wave = normalize_loudness(wave[:n_samples]) * 10 ** (rng.uniform(-GAIN_RANGE_DB, GAIN_RANGE_DB) / 20)
        offset = int(rng.integers(0, n_samples - len(wave) + 1))
        mixture[offset : offset + len(wave)] += wave
    return normalize_loudness(mixture.astype(np.float32))


def build(*, seed: int, tiny: bool, work_dir: Path) -> TaskBuild:
    rng = np.random.default_rng(seed)
    pools, skipped = sample_utterances(rng, tiny=tiny)
    by_split = split_pools(pools)
    clips = []
    for split, per_count in (TINY_MIXTURES_PER_COUNT if tiny else MIXTURES_PER_COUNT).items():
        speakers = sorted(by_split[split])
        for count in COUNTS:
            for _ in range(per_count):
                chosen = sorted(str(speaker) for speaker in rng.choice(speakers, size=count, replace=False))
                picks = [
                    by_split[split][speaker][int(rng.integers(len(by_split[split][speaker])))] for speaker in chosen
                ]
                clips.append(
                    LabeledClip(
                        split=split,
                        label=str(count),
                        wave=mix(rng, [wave for _, wave in picks]),
                        source={"speakers": chosen, "files": [str(clip.path) for clip, _ in picks]},
                    )
                )
    return TaskBuild(spec=SPEC, clips=clips, skipped=skipped)
