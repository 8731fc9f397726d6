"""Prep reads raw audio where a cluster keeps it: a bucket prefix, a manifest whose paths are bucket URIs
(on disk or itself in a bucket), and WebDataset `.tar` shards (local or in a bucket) with per-key
metadata, as Dasheng's `wavlist_to_tar` writes them. Each gives the rows a local prep of the same audio
gives, every input accounted for. Before, `--input s3://...` was a local path: "does not exist"."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import soundfile

from pipeline.audio.inputs import list_inputs, select_subset_hours
from pipeline.prep.run import PrepConfig, run_prep
from pipeline.shards.format import read_rejected, read_shard_table
from tests.support.prep_helpers import tone

pytestmark = pytest.mark.ray
CLIPS = {"a/dog1.flac": 3.0, "a/dog2.wav": 4.5, "b/cat1.flac": 2.0, "b/cat2.flac": 12.5, "c/tiny.wav": 0.01}
LABELS = {"a/dog1.flac": "dog", "a/dog2.wav": "dog", "b/cat1.flac": "cat", "b/cat2.flac": "cat", "c/tiny.wav": "cat"}


def _write_audio(root: Path) -> Path:
    for index, (name, seconds) in enumerate(CLIPS.items()):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(root / name, tone(seconds, freq_hz=200 + 90 * index, seed=index), 16_000)
    (root / "a" / "notes.txt").write_text("not audio")
    return root


def _upload(store, root: Path, prefix: str) -> None:
    client = store.client()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        client.upload_file(str(path), store.bucket, f"{prefix}/{path.relative_to(root).as_posix()}")


def _tar_shard(root: Path, names: list[str]) -> bytes:
    """A WebDataset shard as wavlist_to_tar writes it: KEY.flac (or .wav) and KEY.json of the other columns."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as shard:
        for name in names:
            key = name.replace("/", "_").rpartition(".")[0]
            shard.add(root / name, arcname=f"{key}.{name.rpartition('.')[2]}")
            meta = json.dumps({"label": LABELS[name], "split": "train"}).encode()
            info = tarfile.TarInfo(f"{key}.json")
            info.size = len(meta)
            shard.addfile(info, io.BytesIO(meta))
        readme = tarfile.TarInfo("README.txt")
        readme.size = 2
        shard.addfile(readme, io.BytesIO(b"hi"))
    return buffer.getvalue()


def _prep(input_path: str, output: str) -> dict:
    return run_prep(PrepConfig(input_path=input_path, output_dir=output, segment_s=5.0, show_progress=False)).manifest


def _rows(output: str) -> list[tuple]:
    table = read_shard_table(output, columns=["source", "segment_index", "num_frames", "mel", "label", "split"])
    return sorted(zip(*(table[name].to_pylist() for name in table.column_names)))


@pytest.fixture(scope="module")
def audio(tmp_path_factory) -> Path:
    return _write_audio(tmp_path_factory.mktemp("raw") / "audio")


@pytest.fixture(scope="module")
def local_prep(ray_with_bucket_env, audio, tmp_path_factory):
    output = tmp_path_factory.mktemp("local") / "shards"
    return _prep(str(audio), str(output)), str(output)


def test_a_bucket_prefix_gives_the_rows_of_the_same_folder(ray_with_bucket_env, bucket_env, audio, local_prep):
    _upload(bucket_env, audio, "raw/prefix")
    local, local_output = local_prep
    result = _prep(bucket_env.uri("raw/prefix"), bucket_env.uri("shards/from-prefix"))
    assert _rows(bucket_env.uri("shards/from-prefix")) == _rows(local_output)
    for key in ("num_inputs", "num_rows", "total_hours", "mean", "std", "rejected_by_kind", "skipped_non_audio_files"):
        assert result[key] == local[key], key
    assert result["input"] == bucket_env.uri("raw/prefix").partition("?")[0]
    assert result["rejected_by_kind"] == {"too short": 1}  # tiny.wav: accounted for, not lost
    assert [r["path"] for r in read_rejected(bucket_env.uri("shards/from-prefix"))] == ["c/tiny.wav"]


def test_a_manifest_of_bucket_uris_on_disk_and_one_in_the_bucket(ray_with_bucket_env, bucket_env, audio, tmp_path):
    _upload(bucket_env, audio, "raw/listed")
    rows = [{"path": f"s3://{bucket_env.bucket}/raw/listed/{name}", "label": LABELS[name]} for name in CLIPS]
    rows.append({"path": f"s3://{bucket_env.bucket}/raw/listed/gone.flac", "label": "dog"})
    on_disk = tmp_path / "list.jsonl"
    # Entries without options take the endpoint of the shell (AWS_ENDPOINT_URL, set by bucket_env).
    on_disk.write_text("".join(json.dumps(row) + "\n" for row in rows))
    in_bucket_rows = [{"path": name, "label": LABELS[name]} for name in CLIPS]  # relative to the manifest
    bucket_env.client().put_object(Bucket=bucket_env.bucket, Key="raw/listed/list.jsonl",
                                   Body="".join(json.dumps(row) + "\n" for row in in_bucket_rows).encode())  # fmt: skip
    first = _prep(str(on_disk), str(tmp_path / "from-uris"))
    second = _prep(bucket_env.uri("raw/listed/list.jsonl"), str(tmp_path / "from-bucket-manifest"))
    assert first["rejected_by_kind"] == {"too short": 1, "missing file": 1}
    assert second["num_rows"] == first["num_rows"] > 0
    labels = dict(zip(*(read_shard_table(tmp_path / "from-bucket-manifest", columns=["source", "label"])[c].to_pylist()
                        for c in ("source", "label"))))  # fmt: skip
    assert labels == {name: LABELS[name] for name in CLIPS if name != "c/tiny.wav"}
    missing = [r for r in read_rejected(tmp_path / "from-uris") if r["kind"] == "missing file"]
    assert missing[0]["path"] == f"s3://{bucket_env.bucket}/raw/listed/gone.flac"


def test_tar_shards_local_and_in_a_bucket_give_every_member_with_its_metadata(
    ray_with_bucket_env, bucket_env, audio, tmp_path
):
    names = list(CLIPS)
    shards = tmp_path / "tars"
    shards.mkdir()
    (shards / "part_0000000.tar").write_bytes(_tar_shard(audio, names[:3]))
    (shards / "part_0000001.tar").write_bytes(_tar_shard(audio, names[3:]))
    (shards / "part_0000002.tar.gz").write_bytes(b"\x1f\x8b compressed")
    _upload(bucket_env, shards, "raw/tars")
    local = _prep(str(shards), str(tmp_path / "from-local-tars"))
    remote = _prep(bucket_env.uri("raw/tars"), bucket_env.uri("shards/from-tars"))
    assert _rows(bucket_env.uri("shards/from-tars")) == _rows(str(tmp_path / "from-local-tars"))
    assert remote["num_inputs"] == len(CLIPS) + 1  # the members, and the compressed shard
    assert remote["rejected_by_kind"] == {"too short": 1, "compressed tar": 1}
    assert remote["skipped_non_audio_files"] == 2  # README.txt in each shard
    table = read_shard_table(bucket_env.uri("shards/from-tars"), columns=["source", "label", "split"])
    members = set(zip(*(table[c].to_pylist() for c in ("source", "label", "split"))))
    assert ("part_0000000.tar/a_dog1.flac", "dog", "train") in members
    assert ("part_0000001.tar/b_cat2.flac", "cat", "train") in members
    # The same audio as plain files: the same mel, member by member.
    plain = {(Path(s).name, i): m for s, i, _, m, *_ in _rows(str(tmp_path / "from-local-tars"))}
    assert plain[("a_dog1.flac", 0)] == next(
        m for s, i, _, m, *_ in _rows(str(tmp_path / "from-local-tars")) if s.endswith("a_dog1.flac") and i == 0
    )
    assert local["mean"] == remote["mean"]


def test_a_damaged_shard_keeps_its_members_before_the_damage_and_names_it(tmp_path, audio):
    data = _tar_shard(audio, list(CLIPS)[:3])
    (tmp_path / "cut.tar").write_bytes(data[: len(data) // 2])
    listing = list_inputs(tmp_path / "cut.tar")
    damaged = [i for i in listing.inputs if i.problem_kind == "damaged tar"]
    assert len(damaged) == 1 and damaged[0].source == "cut.tar" and "damaged" in damaged[0].problem
    assert [i.source for i in listing.inputs if not i.problem][0] == "cut.tar/a_dog1.flac"


def test_max_hours_takes_the_same_nested_subset_from_a_bucket(bucket_env, audio):
    _upload(bucket_env, audio, "raw/subset")
    local_inputs, remote_inputs = list_inputs(audio).inputs, list_inputs(bucket_env.uri("raw/subset")).inputs
    assert [(i.source, i.size_bytes) for i in local_inputs] == [(i.source, i.size_bytes) for i in remote_inputs]
    for hours in (2 / 3600, 8 / 3600, 20 / 3600):
        local = [i.source for i in select_subset_hours(local_inputs, max_hours=hours, seed=3)]
        remote = [i.source for i in select_subset_hours(remote_inputs, max_hours=hours, seed=3)]
        assert local == remote
    small, large = (
        set(i.source for i in select_subset_hours(remote_inputs, max_hours=h, seed=3)) for h in (4 / 3600, 20 / 3600)
    )
    assert small < large


def test_an_input_prefix_that_does_not_exist_is_one_line(bucket_env):
    from pipeline.audio.input_file import InputListingError

    with pytest.raises(InputListingError, match=r"--input s3://audioscale-data/raw/nothing-here does not exist"):
        list_inputs(bucket_env.uri("raw/nothing-here"))


def test_a_tar_members_bytes_decode_as_the_file_they_were(audio, tmp_path):
    from pipeline.audio.frontend import get_preset
    from pipeline.audio.segments import iter_segments

    (tmp_path / "one.tar").write_bytes(_tar_shard(audio, ["b/cat2.flac"]))
    member = next(i for i in list_inputs(tmp_path / "one.tar").inputs if not i.problem)
    preset = get_preset("audiomae")
    from_member = [s.mel for s in iter_segments(member.location, preset, 5.0) if not isinstance(s, float)]
    from_file = [s.mel for s in iter_segments(audio / "b/cat2.flac", preset, 5.0) if not isinstance(s, float)]
    assert len(from_member) == len(from_file) == 3
    assert all(np.array_equal(a, b) for a, b in zip(from_member, from_file))
