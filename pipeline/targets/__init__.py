"""HuBERT's k-means target stage: waveform shards -> a codebook of cluster centroids.

    python -m pipeline.targets --shards DIR [--features mfcc] [--clusters 100] [--crop-frames 500]

The codebook (`models.wave.hubert_codebook`) is not turned into label shards: a HuBERT model built with
`codebook=DIR` keeps the centroids and labels each crop on the fly with the same feature function
(`models.wave.hubert_labels`). `ensure_codebook` is what the pretraining driver calls.
"""

from pipeline.targets.codebook import ensure_codebook

__all__ = ["ensure_codebook"]
