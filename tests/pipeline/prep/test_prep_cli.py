"""Prep driver decisions that need no Ray: batch sizing, an input folder with nothing in it."""

from __future__ import annotations

from pipeline.audio.inputs import InputFile
from pipeline.prep.__main__ import main
from pipeline.prep.run import MAX_BATCH_INPUT_BYTES, files_per_batch


def test_batches_balance_cpus_and_cap_input_bytes():
    small = [InputFile(path=f"/a/{i}.wav", source=f"{i}.wav", size_bytes=1_000_000) for i in range(80)]
    assert files_per_batch(small, num_cpus=2) == 10  # 80 files / (4 batches per CPU x 2 CPUs)
    huge = [InputFile(path=f"/a/{i}.wav", source=f"{i}.wav", size_bytes=MAX_BATCH_INPUT_BYTES // 3) for i in range(80)]
    assert files_per_batch(huge, num_cpus=2) == 3
    assert files_per_batch(small[:1], num_cpus=16) == 1


def test_empty_input_folder_exits_one_without_starting_ray(tmp_path, capsys):
    (tmp_path / "audio").mkdir()
    assert main(["--input", str(tmp_path / "audio"), "--output", str(tmp_path / "out"), "--no-progress"]) == 1
    assert "0 inputs -> 0 rows" in capsys.readouterr().out
