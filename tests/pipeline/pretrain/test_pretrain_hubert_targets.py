"""A HuBERT run without a codebook gets the target stage's one for its shards: fitted on the first run,
reused by the next, named in the checkpoint's overrides, and the model learns from it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.wave.hubert_codebook import read_codebook
from pipeline.checkpoint import load_model_from_checkpoint
from pipeline.pretrain.driver import PretrainConfig, run_pretraining
from tests.support.pretrain_testdata import make_tiny_shards

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def waveform_shards(ray_local, tmp_path_factory) -> Path:
    return make_tiny_shards(tmp_path_factory.getbasetemp(), preset_name="waveform")


def hubert_config(shards: Path, workdir: Path, run_name: str) -> PretrainConfig:
    return PretrainConfig.from_flat(
        model_name="hubert-debug",
        model_overrides={"crop_frames": 50},
        shards_dir=str(shards),
        steps=6,
        global_batch_size=8,
        micro_batch_size=4,
        num_workers=1,
        cpus_per_worker=1.0,
        base_lr=0.1,
        warmup_steps=1,
        log_every_steps=2,
        checkpoint_every_steps=6,
        rankme_every_steps=6,
        rankme_n=16,
        run_name=run_name,
        storage_path=str(workdir / "ray_results"),
        tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}",
    )


def test_a_hubert_run_fits_then_reuses_the_codebook_of_its_shards(waveform_shards, tmp_path, capsys):
    first = run_pretraining(hubert_config(waveform_shards, tmp_path, "first"))
    fitted = capsys.readouterr().err
    codebook_dirs = sorted((waveform_shards / "targets").iterdir())
    assert len(codebook_dirs) == 1 and "targets:" in fitted and "reusing" not in fitted
    codebook = read_codebook(codebook_dirs[0])
    assert codebook.centroids.shape == (100, 39)  # iteration 1: k 100 on 39-d MFCCs (HuBERT)
    model, meta = load_model_from_checkpoint(first.checkpoint_dir)
    assert meta["pretrain_config"]["model_overrides"]["codebook"] == str(codebook_dirs[0])
    assert not model.needs_codebook and first.steps == 6
    second = run_pretraining(hubert_config(waveform_shards, tmp_path, "second"))
    assert "reusing" in capsys.readouterr().err and second.steps == 6
    assert sorted((waveform_shards / "targets").iterdir()) == codebook_dirs
    # The checkpoint carries its codebook: it loads, and labels alike, after the shards' copy is gone.
    crops = torch.randn(2, 50, 320)
    expected = model.label_frames(crops)
    moved = waveform_shards.parent / "targets-moved"
    (waveform_shards / "targets").rename(moved)
    try:
        reloaded, _ = load_model_from_checkpoint(first.checkpoint_dir)
        torch.testing.assert_close(reloaded.label_frames(crops), expected)
    finally:
        moved.rename(waveform_shards / "targets")
