"""Listing inputs: directory walk, CSV/JSONL manifests, seeded nested --max-hours subsets."""

from __future__ import annotations

import os

import pytest
import soundfile

from pipeline.audio.inputs import InputListingError, list_inputs, select_subset_hours
from tests.support.prep_helpers import SR, tone


def write_clips(root, count: int, seconds: float = 1.0):
    root.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        soundfile.write(root / f"clip_{index:03d}.wav", tone(seconds, seed=index), SR)


def test_directory_walk_keeps_relative_sources_and_skips_non_audio(tmp_path):
    write_clips(tmp_path / "a" / "b", 2)
    soundfile.write(tmp_path / "top level é.flac", tone(0.5), SR)
    (tmp_path / "a" / "readme.md").write_text("x")
    listing = list_inputs(tmp_path)
    assert [i.source for i in listing.inputs] == ["top level é.flac", "a/b/clip_000.wav", "a/b/clip_001.wav"]
    assert listing.skipped_non_audio == 1
    assert all(os.path.isabs(i.path) and i.size_bytes > 0 for i in listing.inputs)


def test_directory_walk_survives_a_symlink_loop(tmp_path):
    write_clips(tmp_path / "a", 1)
    os.symlink("..", tmp_path / "a" / "up")
    os.symlink(tmp_path / "a", tmp_path / "alias_of_a")
    listing = list_inputs(tmp_path)
    assert [i.source for i in listing.inputs] == ["a/clip_000.wav"]
    assert sorted(listing.skipped_symlink_loops) == ["a/up", "alias_of_a"]


def test_csv_manifest_resolves_relative_paths_and_keeps_label_split(tmp_path):
    write_clips(tmp_path / "audio", 2)
    (tmp_path / "list.csv").write_text("path,label,split\naudio/clip_000.wav,dog,train\naudio/clip_001.wav,cat,\n")
    inputs = list_inputs(tmp_path / "list.csv").inputs
    assert [(i.source, i.label, i.split) for i in inputs] == [
        ("audio/clip_000.wav", "dog", "train"),
        ("audio/clip_001.wav", "cat", None),
    ]
    assert inputs[0].path == str(tmp_path / "audio" / "clip_000.wav") and inputs[0].problem is None


def test_jsonl_manifest_flags_missing_and_duplicate_entries(tmp_path):
    write_clips(tmp_path, 1)
    absolute = tmp_path / "clip_000.wav"
    (tmp_path / "list.jsonl").write_text(
        f'{{"path": "{absolute}"}}\n{{"path": "gone.wav"}}\n\n{{"path": "{absolute}"}}\n'
    )
    inputs = list_inputs(tmp_path / "list.jsonl").inputs
    assert [i.problem_kind for i in inputs] == [None, "missing file", "duplicate entry"]
    assert inputs[2].problem == "duplicate of entry 1"


@pytest.mark.parametrize(
    "content,message", [("name,label\nx.wav,a\n", "needs a 'path'"), ('{"path": "a.wav"}\n{oops\n', "not valid JSON")]
)
def test_malformed_manifest_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / ("list.csv" if "," in content.splitlines()[0] else "list.jsonl")
    path.write_text(content)
    with pytest.raises(InputListingError, match=message):
        list_inputs(path)


def test_input_that_is_neither_folder_nor_manifest_is_a_clear_error(tmp_path):
    (tmp_path / "one.wav").write_bytes(b"")
    with pytest.raises(InputListingError, match=".csv or .jsonl"):
        list_inputs(tmp_path / "one.wav")


@pytest.fixture(scope="module")
def forty_one_second_clips(tmp_path_factory):
    root = tmp_path_factory.mktemp("clips")
    write_clips(root, 40)
    return list_inputs(root).inputs


def test_subsets_are_nested_across_sizes(forty_one_second_clips):
    sizes_s = [5, 10, 20, 40]
    subsets = [
        {i.source for i in select_subset_hours(forty_one_second_clips, max_hours=s / 3600, seed=3)} for s in sizes_s
    ]
    assert [len(subset) for subset in subsets] == sizes_s  # about H hours: 1 s clips reach it exactly
    for smaller, larger in zip(subsets, subsets[1:]):
        assert smaller < larger


def test_subset_depends_on_the_seed_not_on_listing_order(forty_one_second_clips):
    first = select_subset_hours(forty_one_second_clips, max_hours=10 / 3600, seed=1)
    reordered = select_subset_hours(list(reversed(forty_one_second_clips)), max_hours=10 / 3600, seed=1)
    other_seed = select_subset_hours(forty_one_second_clips, max_hours=10 / 3600, seed=2)
    assert [i.source for i in first] == [i.source for i in reordered]
    assert {i.source for i in first} != {i.source for i in other_seed}


def test_subset_larger_than_the_corpus_takes_everything(forty_one_second_clips):
    assert len(select_subset_hours(forty_one_second_clips, max_hours=1.0, seed=0)) == 40
    with pytest.raises(InputListingError, match="positive"):
        select_subset_hours(forty_one_second_clips, max_hours=0, seed=0)


def test_csv_naming_one_file_three_ways_lists_it_once(tmp_path):
    write_clips(tmp_path / "audio", 2)
    absolute = tmp_path / "audio" / "clip_000.wav"
    (tmp_path / "audio" / "list.csv").write_text(f"path\nclip_000.wav\n./clip_000.wav\n{absolute}\nclip_001.wav\n")
    inputs = list_inputs(tmp_path / "audio" / "list.csv").inputs
    assert [i.problem_kind for i in inputs] == [None, "duplicate entry", "duplicate entry", None]
    assert inputs[1].problem == "duplicate of entry 1 ('clip_000.wav', the same file)"
    assert (
        sum(i.size_bytes for i in inputs)
        == absolute.stat().st_size + (tmp_path / "audio" / "clip_001.wav").stat().st_size
    )
