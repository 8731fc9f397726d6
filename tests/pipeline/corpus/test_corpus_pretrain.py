"""The tiny pretraining corpus: composition, held-out material, attribution, determinism, re-runs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import soundfile

from pipeline.corpus.__main__ import COMMAND, main
from pipeline.corpus.sources import holdout
from pipeline.corpus.sources.default_mix import (
    DEFAULT_HOURS_PER_SOURCE,
    packages_for_pretraining,
)
from pipeline.corpus.sources.pretrain_corpus import (
    TINY_HOURS,
    PretrainCorpusConfig,
    build_pretrain_corpus,
)


def hash_tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> Path:
    output_dir = tmp_path_factory.mktemp("corpus") / "tiny"
    assert COMMAND.run(main, ["pretrain", "--output", str(output_dir), "--tiny"]) == 0
    return output_dir


def test_corpus_tiny_has_every_source_as_16k_mono_wavs(tiny_corpus: Path):
    index = json.loads((tiny_corpus / "corpus.json").read_text())
    assert set(index["hours_per_source"]) == set(DEFAULT_HOURS_PER_SOURCE)
    assert all(hours > 0 for hours in index["hours_per_source"].values())
    assert abs(index["total_hours"] - TINY_HOURS) < 0.2 * TINY_HOURS
    for item in index["files"]:
        info = soundfile.info(str(tiny_corpus / item["relative_path"]))
        assert (info.samplerate, info.channels) == (16000, 1)
        assert abs(info.duration - item["duration_s"]) < 1e-3


def test_corpus_leaves_out_every_task_test_speaker_kit_and_prompt(tiny_corpus: Path):
    files = json.loads((tiny_corpus / "corpus.json").read_text())["files"]
    groups = {item["group"] for item in files}
    assert not groups & (set(holdout.SPEAKER_COUNT_TEST_SPEAKERS) | set(holdout.LANGUAGE_SECOND_SPEAKERS))
    assert not groups & set(holdout.DRUM_TEST_KITS) and not groups & set(holdout.TEST_VOICE_VARIANTS)
    assert {item["package"] for item in files} <= set(packages_for_pretraining())
    assert "timgm6mb-soundfont" not in packages_for_pretraining()


def test_corpus_attribution_names_every_package_and_license(tiny_corpus: Path):
    attribution = (tiny_corpus / "ATTRIBUTION.md").read_text()
    for package in packages_for_pretraining():
        assert f"| {package} |" in attribution


def test_corpus_same_seed_gives_identical_bytes(tiny_corpus: Path, tmp_path: Path):
    build_pretrain_corpus(PretrainCorpusConfig(output_dir=tmp_path / "again", seed=0, tiny=True))
    assert hash_tree(tmp_path / "again") == hash_tree(tiny_corpus)


def test_corpus_second_run_does_nothing_and_says_so(tiny_corpus: Path, capsys):
    before = {path: path.stat().st_mtime_ns for path in tiny_corpus.rglob("*")}
    assert COMMAND.run(main, ["pretrain", "--output", str(tiny_corpus), "--tiny"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert {path: path.stat().st_mtime_ns for path in tiny_corpus.rglob("*")} == before


def test_corpus_refuses_a_directory_it_did_not_make(tmp_path: Path, capsys):
    (tmp_path / "notes.txt").write_text("user data")
    assert COMMAND.run(main, ["pretrain", "--output", str(tmp_path), "--tiny"]) == 2
    assert "not made by this builder" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "user data"
