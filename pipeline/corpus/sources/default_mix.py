"""The default pretraining corpus: per-source hour budgets over the packaged and rendered audio.

Task test material (held-out speakers, prompt texts, drum kits; the test soundfont; the test
voice variants) is left out, so probing a model pretrained on this corpus never tests on audio
it has seen.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile

from pipeline.audio.frontend import TARGET_SAMPLE_RATE_HZ
from pipeline.corpus.sources import (
    asterisk,
    espeak,
    fillets,
    holdout,
    hydrogen,
    opensfx,
    soundfonts,
)
from pipeline.corpus.sources.audio_io import convert_to_16k_wav, write_wav_16k
from pipeline.corpus.sources.records import SourceClip
from pipeline.session.worker_pool import map_ordered

# Hours per source for the default 3-hour corpus; `--hours` scales them all alike. Sources with
# less audio than their budget (music, drums, effects) contribute everything they have.
DEFAULT_HOURS_PER_SOURCE: dict[str, float] = {
    "asterisk_prompts": 0.56,  # real speech, 5 languages
    "fillets_dialogue_cs": 0.35,  # real speech, voice acting
    "fillets_dialogue_nl": 0.30,
    "asterisk_moh": 0.30,  # real music
    "fillets_music": 0.40,
    "hydrogen_drums": 0.15,  # real drums
    "openttd_opensfx": 0.04,  # real sound effects (all 73 of them)
    "fillets_effects": 0.10,
    "soundfont_melodies": 0.55,  # rendered instrument melodies
    "espeak_speech": 0.25,  # synthetic speech, 9 languages
}
DEFAULT_TOTAL_HOURS = sum(DEFAULT_HOURS_PER_SOURCE.values())
MELODY_CLIP_MS = 4000
ESPEAK_MEAN_UTTERANCE_S = 3.0
SPEECH_SOURCES = {"asterisk_prompts", "fillets_dialogue_cs", "fillets_dialogue_nl"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class CorpusFile:
    relative_path: str
    source: str
    package: str
    group: str
    duration_s: float


def _duration_s(path: Path) -> float:
    return soundfile.info(str(path)).duration


def _keep_for_pretraining(clip: SourceClip) -> bool:
    is_speech = clip.source in SPEECH_SOURCES
    return not holdout.is_test_material(
        speaker=clip.group if is_speech else None,
        prompt_id=clip.info.get("prompt_id"),
        kit=clip.group if clip.source == "hydrogen_drums" else None,
    )


def convert_within_budget(
    clips: list[SourceClip], budget_s: float, rng: np.random.Generator, audio_dir: Path, output_dir: Path
) -> list[CorpusFile]:
    """Shuffle `clips`, take them until `budget_s` is reached (the last one cut), convert with sox."""
    order = rng.permutation(len(clips))
    chosen: list[tuple[SourceClip, float | None, str]] = []
    total_s = 0.0
    for rank, index in enumerate(order):
        if total_s >= budget_s:
            break
        clip = clips[int(index)]
        duration_s = _duration_s(clip.path)
        if duration_s == 0:  # a few packaged prompts are empty files
            continue
        cut_s = budget_s - total_s if duration_s > budget_s - total_s else None
        total_s += min(duration_s, budget_s - total_s)
        chosen.append((clip, cut_s, f"{clip.source}_{rank:05d}.wav"))

    def convert(item: tuple[SourceClip, float | None, str]) -> CorpusFile:
        clip, cut_s, name = item
        target = audio_dir / clip.source / name
        duration_s = convert_to_16k_wav(clip.path, target, max_duration_s=cut_s)
        return CorpusFile(
            relative_path=str(target.relative_to(output_dir)),
            source=clip.source,
            package=clip.package,
            group=clip.group,
            duration_s=round(duration_s, 4),
        )

    return map_ordered(convert, chosen)


def render_melodies(
    budget_s: float, rng: np.random.Generator, audio_dir: Path, output_dir: Path, work_dir: Path
) -> list[CorpusFile]:
    """Random melodies through the train soundfont, programs spread over the melodic GM families."""
    n_clips = max(1, math.ceil(budget_s * 1000 / MELODY_CLIP_MS))
    slots = []
    for _ in range(n_clips):
        program = int(rng.integers(0, 112))  # 112..127: percussive and sound-effect programs
        low_pitch = 36 if program // 8 == 4 else 48  # basses sit an octave lower
        slots.append(
            soundfonts.random_melody(
                rng,
                program=program,
                low_pitch=low_pitch,
                high_pitch=low_pitch + 36,
                n_notes=int(rng.integers(3, 9)),
                note_ms=int(rng.integers(250, 700)),
            )
        )
    name = holdout.TRAIN_SOUNDFONT
    clips = soundfonts.render_slots(
        name, slots, slot_ms=MELODY_CLIP_MS + 1000, clip_ms=MELODY_CLIP_MS, work_dir=work_dir
    )
    return [
        _write_rendered(
            wave,
            f"soundfont_melodies_{index:05d}.wav",
            "soundfont_melodies",
            soundfonts.soundfont_package(name),
            name,
            audio_dir,
            output_dir,
        )
        for index, wave in enumerate(clips)
    ]


def render_espeak_speech(
    budget_s: float, rng: np.random.Generator, audio_dir: Path, output_dir: Path, work_dir: Path
) -> list[CorpusFile]:
    """Random sentences in the 9 espeak languages, spoken only by train voice variants."""
    languages = sorted(espeak.LANGUAGES)
    requests = []
    for index in range(max(1, math.ceil(budget_s / ESPEAK_MEAN_UTTERANCE_S))):
        language = languages[index % len(languages)]
        requests.append(
            espeak.SpeechRequest(
                text=espeak.random_sentence(rng, language, "train", n_words=int(rng.integers(4, 9))),
                voice=espeak.LANGUAGES[language][0],
                variant=str(rng.choice(holdout.TRAIN_VOICE_VARIANTS)),
                speed_wpm=int(rng.integers(130, 200)),
                pitch=int(rng.integers(25, 75)),
            )
        )
    waves = espeak.synthesize_all(requests, work_dir)
    return [
        _write_rendered(
            0.5 * wave / max(float(np.abs(wave).max()), 1e-6),
            f"espeak_speech_{index:05d}.wav",
            "espeak_speech",
            "espeak-ng",
            request.variant,
            audio_dir,
            output_dir,
        )
        for index, (wave, request) in enumerate(zip(waves, requests))
    ]


def _write_rendered(
    wave: np.ndarray, name: str, source: str, package: str, group: str, audio_dir: Path, output_dir: Path
) -> CorpusFile:
    peak = float(np.abs(wave).max())
    if peak > 0.99:  # rendered audio has no natural level: only guard against clipping
        wave = wave * (0.99 / peak)
    target = audio_dir / source / name
    write_wav_16k(target, wave)
    return CorpusFile(
        relative_path=str(target.relative_to(output_dir)),
        source=source,
        package=package,
        group=group,
        duration_s=round(len(wave) / TARGET_SAMPLE_RATE_HZ, 4),
    )


def _file_sources(work_dir: Path) -> dict[str, Callable[[], list[SourceClip]]]:
    return {
        "asterisk_prompts": lambda: asterisk.prepare_asterisk_prompts(),
        "fillets_dialogue_cs": lambda: fillets.prepare_fillets_dialogue("cs"),
        "fillets_dialogue_nl": lambda: fillets.prepare_fillets_dialogue("nl"),
        "asterisk_moh": lambda: asterisk.prepare_asterisk_music_on_hold(),
        "fillets_music": lambda: fillets.prepare_fillets_music(),
        "hydrogen_drums": lambda: hydrogen.prepare_hydrogen_drums(labelled_only=False),
        "openttd_opensfx": lambda: opensfx.prepare_opensfx(work_dir / "opensfx"),
        "fillets_effects": lambda: fillets.prepare_fillets_effects(),
    }


def build_source(
    source: str, budget_s: float, rng: np.random.Generator, output_dir: Path, work_dir: Path
) -> list[CorpusFile]:
    """The files of one source for a budget of `budget_s` seconds."""
    audio_dir = output_dir / "audio"
    if source == "soundfont_melodies":
        return render_melodies(budget_s, rng, audio_dir, output_dir, work_dir / source)
    if source == "espeak_speech":
        return render_espeak_speech(budget_s, rng, audio_dir, output_dir, work_dir / source)
    clips = [clip for clip in _file_sources(work_dir)[source]() if _keep_for_pretraining(clip)]
    if not clips:
        raise FileNotFoundError(f"source {source}: no audio files found; are its Debian packages installed?")
    return convert_within_budget(clips, budget_s, rng, audio_dir, output_dir)


def packages_for_pretraining() -> list[str]:
    """Every Debian package the default corpus reads or renders with."""
    packages = {package for _, _, package in asterisk.PROMPT_SPEAKERS.values()}
    packages |= {package for _, _, package, _ in espeak.LANGUAGES.values()}
    packages |= set(fillets.DIALOGUE_PACKAGES.values())
    packages |= {
        "asterisk-moh-opsound-wav",
        "fillets-ng-data",
        "hydrogen-drumkits",
        "openttd-opensfx",
        soundfonts.soundfont_package(holdout.TRAIN_SOUNDFONT),
        "fluidsynth",
        "espeak-ng",
        "sox",
        "libsox-fmt-all",
    }
    return sorted(packages)
