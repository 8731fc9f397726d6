"""A real fitted MFCC codebook and real speech crops for the HuBERT model tests (made once per module)."""

from __future__ import annotations

from pathlib import Path

import torch

from pipeline.shards.crops import read_crops
from pipeline.targets import ensure_codebook
from tests.support.speech_waveform_shards import write_speech_waveform_shards

DEBUG_CROP_FRAMES = 100  # hubert-debug's 2 s crops


def speech_codebook_and_crops(root: Path, *, clusters: int = 16) -> tuple[Path, torch.Tensor]:
    """(codebook dir fitted on ~15 s of espeak-ng speech, the six 2 s training crops the reader yields)."""
    shards = write_speech_waveform_shards(root)
    codebook = ensure_codebook(
        shards, clusters=clusters, crop_frames=DEBUG_CROP_FRAMES, sample_fraction=1.0, log=lambda line: None
    )
    crops = read_crops(shards, crop_frames=DEBUG_CROP_FRAMES, seed=0, limit=6)
    return codebook, torch.from_numpy(crops)
