"""HuBERT's frame targets from a waveform crop: 39-d MFCC features and the nearest k-means centroid.

One function computes the features for both the k-means stage (`python -m pipeline.targets`, which
fits the centroids) and the model, which labels each training crop on the fly; so a crop's labels
are exactly what an offline labelling pass over the same crop would give.

Features (HuBERT Sec. IV-B, unsupervised unit discovery; fairseq examples/hubert/simple_kmeans/dump_mfcc_feature.py): Kaldi
MFCC with torchaudio's defaults (25 ms window, 10 ms shift, 23 mel bins, 13 cepstra, no energy,
`snip_edges`), plus first and second deltas: 39 values per 10 ms frame (100 Hz).

Input: the crop the model trains on, standardised as the reader standardises it (per segment),
where fairseq takes the raw waveform. A gain changes every log-mel energy by one constant, which the
DCT puts into c0 alone, and Kaldi removes each frame's DC offset anyway: only c0 differs from
fairseq's, by a constant per segment; the stage and the model see the same crops, so they agree.

Alignment with the 20 ms encoder frames (fairseq hubert.py `forward_targets`: label_rate 100 over
a 320-sample encoder stride gives feat2tar_ratio 2, i.e. labels 0, 2, 4, ... of the 100 Hz stream).
The conv encoder's frame t sees samples [320 t, 320 t + 400); Kaldi's frame j (snip_edges) sees
[160 j, 160 j + 400). Both pad the crop's end with `TAIL_PADDING_SAMPLES` zeros, so a crop of
T stored frames gives T encoder frames and 2 T - 1 MFCC frames, and label t = MFCC frame 2 t covers
exactly the samples encoder frame t covers.
"""

from __future__ import annotations

import torch
from torch import nn

SAMPLE_RATE_HZ = 16_000
ENCODER_HOP_SAMPLES = 320  # wav2vec 2.0 / HuBERT conv feature encoder stride: 5 x 2^6 (20 ms)
ENCODER_RECEPTIVE_FIELD_SAMPLES = 400  # its receptive field (25 ms), wav2vec 2.0 Sec. 4.2
TAIL_PADDING_SAMPLES = ENCODER_RECEPTIVE_FIELD_SAMPLES - ENCODER_HOP_SAMPLES  # 80: one frame per stored frame
MFCC_HOP_SAMPLES = 160  # Kaldi frame_shift 10 ms: HuBERT's 100 Hz MFCC label rate (Sec. IV-B)
MFCC_PER_ENCODER_FRAME = ENCODER_HOP_SAMPLES // MFCC_HOP_SAMPLES  # fairseq feat2tar_ratio = 100 * 320 / 16000
MFCC_COEFFICIENTS = 13  # Kaldi num_ceps default; HuBERT Sec. IV-B "13 coefficients"
MFCC_FEATURE_DIM = 3 * MFCC_COEFFICIENTS  # with deltas and delta-deltas: 39


def mfcc_features(wave_16k: torch.Tensor) -> torch.Tensor:
    """One 16 kHz waveform (samples,) -> float32 (1 + (samples - 400) // 160, 39): MFCC, delta, delta-delta.

    As fairseq's MfccFeatureReader: `torchaudio.compliance.kaldi.mfcc(use_energy=False)` (dither 0, so
    the same crop always gives the same features), then `compute_deltas` twice along time.
    """
    import torchaudio  # only the labelling needs it; models import without it

    if wave_16k.ndim != 1 or wave_16k.numel() < ENCODER_RECEPTIVE_FIELD_SAMPLES:
        raise ValueError(
            f"mfcc_features takes one waveform of at least {ENCODER_RECEPTIVE_FIELD_SAMPLES} samples "
            f"(25 ms at 16 kHz), got shape {tuple(wave_16k.shape)}"
        )
    with torch.autocast(device_type=wave_16k.device.type, enabled=False):
        cepstra = torchaudio.compliance.kaldi.mfcc(
            wave_16k.float()[None], sample_frequency=SAMPLE_RATE_HZ, use_energy=False
        )  # (frames, 13)
        by_time = cepstra.T  # compute_deltas runs along the last axis
        deltas = torchaudio.functional.compute_deltas(by_time)
        delta_deltas = torchaudio.functional.compute_deltas(deltas)
        return torch.cat([by_time, deltas, delta_deltas]).T.contiguous()  # (frames, 39)


def crop_waveform(crop: torch.Tensor) -> torch.Tensor:
    """A stored crop (frames, 320) -> its waveform (frames x 320 + 80,), the tail padded with zeros."""
    if crop.ndim != 2 or crop.shape[1] != ENCODER_HOP_SAMPLES:
        raise ValueError(
            f"a waveform crop is (frames, {ENCODER_HOP_SAMPLES}) samples (the `waveform` front-end preset), "
            f"got shape {tuple(crop.shape)}"
        )
    return nn.functional.pad(crop.reshape(-1), (0, TAIL_PADDING_SAMPLES))


def crop_mfcc_features(crop: torch.Tensor) -> torch.Tensor:
    """A stored crop (T, 320) -> its 100 Hz MFCC features (2 T - 1, 39); rows 0, 2, ... align with frames."""
    return mfcc_features(crop_waveform(crop))


def nearest_centroid(features: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """(n, dim) features, (k, dim) centroids -> int64 (n,): index of the closest centroid (squared
    Euclidean, as fairseq's ApplyKmeans and scikit-learn's predict)."""
    with torch.autocast(device_type=features.device.type, enabled=False):
        features, centroids = features.float(), centroids.float()
        # |x|^2 is the same for every centroid: argmin of |c|^2 - 2 x.c is the nearest one
        distances = centroids.square().sum(dim=1) - 2.0 * features @ centroids.T
        return distances.argmin(dim=1)


class MfccFrameLabeller(nn.Module):
    """Labels a batch of waveform crops (batch, T, 320) with (batch, T) cluster indices, one per
    20 ms frame. The centroids are a buffer: saved with every checkpoint, never trained."""

    def __init__(self, centroids: torch.Tensor) -> None:
        super().__init__()
        if centroids.ndim != 2 or centroids.shape[1] != MFCC_FEATURE_DIM:
            raise ValueError(
                f"an MFCC codebook has (clusters, {MFCC_FEATURE_DIM}) centroids, got {tuple(centroids.shape)}"
            )
        self.register_buffer("centroids", centroids.float().clone())

    @property
    def n_clusters(self) -> int:
        return self.centroids.shape[0]

    def flops_per_crop(self, frames: int) -> float:
        """The distances to every centroid (2 k dim per label); Kaldi's MFCC itself (FFT, filterbank, DCT:
        ~40 kFLOP per 10 ms frame, ~1e-4 of hubert-base's training FLOPs per frame) is left out."""
        return 2.0 * self.centroids.numel() * frames

    @torch.compiler.disable  # a host-side loop of Kaldi calls: nothing a compiled graph would gain
    @torch.no_grad()
    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        labels = []
        for crop in batch:  # Kaldi's MFCC takes one waveform at a time (~8 ms per 10 s crop on a CPU core)
            features = crop_mfcc_features(crop)[::MFCC_PER_ENCODER_FRAME]  # (T, 39)
            labels.append(nearest_centroid(features, self.centroids))
        return torch.stack(labels)  # (batch, T)
