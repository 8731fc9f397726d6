"""Source preparers: the MIDI writer, the OpenSFX container, drum names, rendering, packages."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import soundfile

from pipeline.corpus.sources import (
    asterisk,
    debian,
    fillets,
    holdout,
    hydrogen,
    opensfx,
)
from pipeline.corpus.sources.midi_file import (
    MidiNote,
    variable_length_quantity,
    write_midi_file,
)
from pipeline.corpus.sources.soundfonts import NoteSlot, render_slots


def test_corpus_midi_variable_length_quantity_matches_the_smf_spec_examples():
    # The examples table of the Standard MIDI File 1.0 specification.
    examples = {
        0x00: "00",
        0x40: "40",
        0x7F: "7f",
        0x80: "8100",
        0x2000: "c000",
        0x3FFF: "ff7f",
        0x4000: "818000",
        0x100000: "c08000",
        0x1FFFFF: "ffff7f",
        0x200000: "81808000",
        0x0FFFFFFF: "ffffff7f",
    }
    for value, expected_hex in examples.items():
        assert variable_length_quantity(value).hex() == expected_hex


def test_corpus_midi_file_has_header_track_length_and_one_ms_ticks(tmp_path: Path):
    path = tmp_path / "one.mid"
    write_midi_file(path, [MidiNote(start_ms=0, duration_ms=1500, pitch=69, velocity=100, program=0)], end_ms=2000)
    data = path.read_bytes()
    assert data[:4] == b"MThd" and int.from_bytes(data[8:10], "big") == 0  # format 0
    assert int.from_bytes(data[12:14], "big") == 1000  # ticks per quarter
    assert data[14:18] == b"MTrk" and int.from_bytes(data[18:22], "big") == len(data) - 22
    assert bytes.fromhex("ff5103") + (1_000_000).to_bytes(3, "big") in data  # tempo: 1 s per quarter
    assert variable_length_quantity(1500) + bytes([0x80, 69, 0]) in data  # note-off 1500 ticks later
    assert data.endswith(variable_length_quantity(500) + b"\xff\x2f\x00")


def test_corpus_fluidsynth_renders_a4_at_440_hz_and_bends_it_by_cents(tmp_path: Path):
    bends_cents = (0.0, 100.0, -50.0)
    slots = [
        NoteSlot(
            notes=(
                MidiNote(
                    start_ms=0,
                    duration_ms=1000,
                    pitch=69,
                    velocity=100,
                    program=73,  # flute
                    bend_cents=bend,
                ),
            )
        )
        for bend in bends_cents
    ]
    waves = render_slots(holdout.TEST_SOUNDFONT, slots, slot_ms=1500, clip_ms=1000, work_dir=tmp_path)
    for bend, wave in zip(bends_cents, waves):
        spectrum = np.abs(np.fft.rfft(wave[2000:14000] * np.hanning(12000)))
        peak_hz = np.argmax(spectrum) * 16000 / 12000
        assert abs(peak_hz - 440.0 * 2 ** (bend / 1200)) < 3.0


def test_corpus_opensfx_container_holds_73_wavs_with_credits():
    sounds = opensfx.read_opensfx_catalog()
    assert len(sounds) == 73
    n_samples = []
    for description, wav in sounds:
        assert "License" in description
        wave, sample_rate_hz = soundfile.read(io.BytesIO(wav))
        assert sample_rate_hz == 44100
        n_samples.append(len(wave))
    assert sum(count == 0 for count in n_samples) == 2  # the two "Unused/Nothing" placeholders


def test_corpus_opensfx_unpacks_the_71_real_sounds(tmp_path: Path):
    clips = opensfx.prepare_opensfx(tmp_path)
    assert len(clips) == 71
    assert all(soundfile.info(str(clip.path)).frames > 0 for clip in clips)


def test_corpus_drum_names_map_to_classes():
    expected = {
        'Kick (Tama Superstar 22")': "kick",
        "Snare Rimshot (Pearl Free Floating Maple 14x3.5)": "snare",
        "Floor Tom": "tom",
        "Closed HH": "hihat",
        "Sabian Hat Semi-Open": "hihat",
        "Crash/Ride Bell (Paiste)": "cymbal",
        "Dununba1 Bell": "hand_percussion",
        "Cajon Thump": "hand_percussion",
        "c3 - bass drum 1": "kick",
        "Stick": None,
        "Zap 1": None,
        "17": None,
    }
    assert {name: hydrogen.drum_class(name) for name in expected} == expected


def test_corpus_hydrogen_kits_give_every_class_in_train_and_test():
    clips = hydrogen.prepare_hydrogen_drums()
    train = {
        clip.info["drum_class"] for clip in clips if clip.group not in holdout.DRUM_TEST_KITS + holdout.DRUM_VALID_KITS
    }
    test = {clip.info["drum_class"] for clip in clips if clip.group in holdout.DRUM_TEST_KITS}
    assert train == test == set(hydrogen.DRUM_CLASSES)
    assert len({clip.group for clip in clips}) == 14


def test_corpus_asterisk_prompts_share_texts_across_languages():
    clips = asterisk.prepare_asterisk_prompts(speakers=["allison", "june", "carlo", "ivrvoice-ru"])
    ids_by_language = {}
    for clip in clips:
        ids_by_language.setdefault(clip.info["language"], set()).add(clip.info["prompt_id"])
    assert set(ids_by_language) == {"en", "es", "fr", "it", "ru"}
    assert len(set.intersection(*ids_by_language.values())) >= 400


def test_corpus_fillets_main_voices_are_two_per_dubbing():
    for language in ("cs", "nl"):
        speakers = {clip.group for clip in fillets.prepare_fillets_dialogue(language, main_voices_only=True)}
        assert speakers == {f"fillets-{language}-m", f"fillets-{language}-v"}


def test_corpus_missing_packages_are_named_with_the_apt_command():
    assert debian.missing_packages(["sox", "no-such-package-audioscale"]) == ["no-such-package-audioscale"]
    assert debian.install_command(["a", "b"]) == "sudo apt-get install -y --no-install-recommends a b"


def test_corpus_holdout_prompt_split_is_stable_and_near_70_10_20():
    prompt_ids = [f"prompt-{index}" for index in range(5000)]
    splits = [holdout.prompt_split(prompt_id) for prompt_id in prompt_ids]
    assert splits == [holdout.prompt_split(prompt_id) for prompt_id in prompt_ids]
    shares = {split: splits.count(split) / len(splits) for split in ("train", "valid", "test")}
    assert abs(shares["train"] - 0.7) < 0.03 and abs(shares["valid"] - 0.1) < 0.02 and abs(shares["test"] - 0.2) < 0.03
