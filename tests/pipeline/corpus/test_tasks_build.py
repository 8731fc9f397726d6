"""The tiny task build: HEAR format, determinism, held-out splits, baseline, idempotent re-run."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import soundfile

from pipeline.corpus.__main__ import COMMAND, main
from pipeline.corpus.sources import build_marker, holdout
from pipeline.corpus.tasks.build import TASK_BUILDERS, TasksConfig, build_tasks
from pipeline.corpus.tasks.hear_writer import SPLITS
from pipeline.evaluate.naive_baseline import run_baseline

HEAR_METADATA_KEYS = {
    "task_name",
    "embedding_type",
    "prediction_type",
    "split_mode",
    "splits",
    "sample_duration",
    "evaluation",
}


def hash_tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def tiny_tasks(tmp_path_factory) -> Path:
    output_dir = tmp_path_factory.mktemp("tasks") / "tiny"
    build_tasks(TasksConfig(output_dir=output_dir, seed=0, tiny=True))
    return output_dir


def clip_sources(task_dir: Path) -> dict[str, dict[str, dict]]:
    return json.loads((task_dir / "clip_sources.json").read_text())


def values_in(task_dir: Path, split: str, key: str) -> set:
    values = set()
    for source in clip_sources(task_dir)[split].values():
        value = source.get(key)
        values |= set(value) if isinstance(value, list) else {value}
    return values - {None}


def test_tasks_every_task_is_valid_hear_format(tiny_tasks: Path):
    index = json.loads((tiny_tasks / "tasks.json").read_text())
    assert [entry["task_name"] for entry in index["tasks"]] == list(TASK_BUILDERS)
    for entry in index["tasks"]:
        task_dir = tiny_tasks / entry["task_name"]
        metadata = json.loads((task_dir / "task_metadata.json").read_text())
        assert HEAR_METADATA_KEYS <= set(metadata) and metadata["splits"] == list(SPLITS)
        assert metadata["evaluation"][0] == "top1_acc" and metadata["embedding_type"] == "scene"
        with open(task_dir / "labelvocabulary.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert [int(row["idx"]) for row in rows] == list(range(len(rows))) == list(range(entry["n_classes"]))
        vocabulary = {row["label"] for row in rows}
        for split in SPLITS:
            labels = json.loads((task_dir / f"{split}.json").read_text())
            wavs = sorted(path.name for path in (task_dir / "16000" / split).glob("*.wav"))
            assert sorted(labels) == wavs and len(wavs) == entry["split_sizes"][split] > 0
            assert all(len(label) == 1 and label[0] in vocabulary for label in labels.values())
            assert sorted(clip_sources(task_dir)[split]) == wavs
            for name in wavs[:3]:
                info = soundfile.info(str(task_dir / "16000" / split / name))
                assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
                assert info.frames == round(metadata["sample_duration"] * 16000)


def test_tasks_same_seed_gives_identical_bytes_and_another_seed_does_not(tiny_tasks: Path, tmp_path: Path):
    build_tasks(TasksConfig(output_dir=tmp_path / "again", seed=0, tiny=True))
    assert hash_tree(tmp_path / "again") == hash_tree(tiny_tasks)
    # One builder with another seed is enough to show the seed matters.
    other = TASK_BUILDERS["speaker_count"](seed=12345, tiny=True, work_dir=tmp_path / "work")
    first_index = list(TASK_BUILDERS).index("speaker_count")
    same = TASK_BUILDERS["speaker_count"](seed=first_index, tiny=True, work_dir=tmp_path / "work")
    assert [clip.source for clip in other.clips] != [clip.source for clip in same.clips]


def test_tasks_real_language_test_prompts_and_second_speakers_are_unseen(tiny_tasks: Path):
    task_dir = tiny_tasks / "language_real"
    assert not values_in(task_dir, "train", "prompt_id") & values_in(task_dir, "test", "prompt_id")
    assert not values_in(task_dir, "train", "prompt_id") & values_in(task_dir, "valid", "prompt_id")
    assert not values_in(task_dir, "train", "speaker") & set(holdout.LANGUAGE_SECOND_SPEAKERS)
    metadata = json.loads((task_dir / "task_metadata.json").read_text())
    assert "Confound" in metadata["notes"] and "speaker" in metadata["notes"]


def test_tasks_synthetic_speech_voices_and_words_are_disjoint(tiny_tasks: Path):
    for name in ("language_synthetic", "spoken_digits"):
        task_dir = tiny_tasks / name
        variants = {split: values_in(task_dir, split, "variant") for split in SPLITS}
        assert variants["train"] and not variants["train"] & (variants["valid"] | variants["test"])
    task_dir = tiny_tasks / "language_synthetic"
    words = {split: {word for text in values_in(task_dir, split, "text") for word in text.split()} for split in SPLITS}
    assert not words["train"] & words["test"] and not words["train"] & words["valid"]
    assert "allison" in values_in(tiny_tasks / "spoken_digits", "test", "speaker")  # the real recordings


def test_tasks_rendered_tasks_test_on_another_soundfont(tiny_tasks: Path):
    for name in ("pitch", "instrument_family"):
        task_dir = tiny_tasks / name
        assert values_in(task_dir, "train", "soundfont") == {holdout.TRAIN_SOUNDFONT}
        assert values_in(task_dir, "test", "soundfont") == {holdout.TEST_SOUNDFONT}


def test_tasks_drum_kits_and_count_speakers_are_disjoint(tiny_tasks: Path):
    kits = {split: values_in(tiny_tasks / "drum_type", split, "kit") for split in SPLITS}
    assert kits["test"] == set(holdout.DRUM_TEST_KITS) and not kits["train"] & (kits["valid"] | kits["test"])
    speakers = {split: values_in(tiny_tasks / "speaker_count", split, "speakers") for split in SPLITS}
    assert speakers["test"] <= set(holdout.SPEAKER_COUNT_TEST_SPEAKERS)
    assert not (speakers["train"] | speakers["valid"]) & speakers["test"]


def test_tasks_speaker_count_label_is_the_number_of_distinct_voices(tiny_tasks: Path):
    task_dir = tiny_tasks / "speaker_count"
    for split in SPLITS:
        labels = json.loads((task_dir / f"{split}.json").read_text())
        for name, source in clip_sources(task_dir)[split].items():
            assert int(labels[name][0]) == len(set(source["speakers"]))


def test_tasks_baseline_beats_chance_on_every_tiny_task(tiny_tasks: Path):
    for result in run_baseline(tiny_tasks):
        assert result.chance_accuracy < result.test_accuracy, result


def test_tasks_second_run_does_nothing(tiny_tasks: Path, capsys):
    before = {path: path.stat().st_mtime_ns for path in tiny_tasks.rglob("*")}
    assert COMMAND.run(main, ["tasks", "--output", str(tiny_tasks), "--tiny", "--no-baseline"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert {path: path.stat().st_mtime_ns for path in tiny_tasks.rglob("*")} == before


def test_tasks_other_settings_on_a_built_directory_fail_clearly(tiny_tasks: Path, capsys):
    assert COMMAND.run(main, ["tasks", "--output", str(tiny_tasks), "--tiny", "--seed", "7", "--no-baseline"]) == 2
    assert "other settings" in capsys.readouterr().err


def test_tasks_built_by_an_older_format_are_rebuilt_with_the_same_bytes(tiny_tasks: Path, tmp_path: Path, capsys):
    stale = tmp_path / "stale"
    shutil.copytree(tiny_tasks, stale)
    marker = stale / build_marker.COMPLETE_MARKER
    old_settings = json.loads(marker.read_text()) | {"format_version": 1}
    marker.write_text(json.dumps(old_settings))
    for metadata_path in stale.glob("*/task_metadata.json"):  # what format 1 wrote: no label_kind
        metadata = json.loads(metadata_path.read_text())
        metadata.pop("label_kind")
        metadata_path.write_text(json.dumps(metadata))
    (stale / "leftover_from_old_code.txt").write_text("x")
    assert COMMAND.run(main, ["tasks", "--output", str(stale), "--tiny", "--no-baseline"]) == 0
    assert "older format (version 1, now 2); rebuilding" in capsys.readouterr().out
    assert hash_tree(stale) == hash_tree(tiny_tasks)
    language_tasks = {
        path.parent.name
        for path in stale.glob("*/task_metadata.json")
        if json.loads(path.read_text()).get("label_kind") == "language"
    }
    assert language_tasks == {"language_real", "language_synthetic"}
