"""Features the k-means stage clusters, computed by the function the model labels with.

"mfcc" (HuBERT iteration 1): every 100 Hz frame of `models.wave.hubert_labels.crop_mfcc_features`, the
crop padded as the encoder pads it. fairseq's learn_kmeans fits on all 100 Hz MFCC frames, though
training uses every second one (label_rate 100 over 50 Hz frames); we do the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from models.wave.hubert_labels import MFCC_FEATURE_DIM, crop_mfcc_features

FEATURE_PARAMETERS = {
    # Recorded in the codebook manifest: what a reader needs to compute the same features again.
    "mfcc": {
        "kind": "mfcc",
        "function": "models.wave.hubert_labels.crop_mfcc_features",
        "dim": MFCC_FEATURE_DIM,
        "frame_rate_hz": 100,
        "mfcc": "torchaudio.compliance.kaldi.mfcc(sample_frequency=16000, use_energy=False), other arguments "
        "at their defaults (25 ms window, 10 ms shift, 23 mel bins, 13 cepstra, snip_edges)",
        "deltas": "torchaudio.functional.compute_deltas, twice (win_length 5)",
        "crop_tail_padding_samples": 80,
        "input": "each crop normalised as the training reader does (waveform preset: per segment)",
    },
}


def crop_features(crops: np.ndarray, kind: str, log: Callable[[str], None] = lambda line: None) -> np.ndarray:
    """float32 (n, T, 320) waveform crops -> float32 (n x (2 T - 1), feature_dim), crop after crop."""
    if kind != "mfcc":
        raise ValueError(f"features {kind!r} are not implemented; use 'mfcc'")
    started, last_report, rows = time.monotonic(), time.monotonic(), []
    with torch.inference_mode():
        for index, crop in enumerate(crops):
            rows.append(crop_mfcc_features(torch.from_numpy(np.ascontiguousarray(crop))).numpy())
            if time.monotonic() - last_report > 10.0:
                last_report = time.monotonic()
                log(f"targets: features of {index + 1}/{len(crops)} crops ({time.monotonic() - started:.0f} s)")
    if not rows:
        return np.zeros((0, MFCC_FEATURE_DIM), np.float32)
    return np.concatenate(rows)
