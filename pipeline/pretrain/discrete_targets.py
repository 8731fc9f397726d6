"""Targets for a model that predicts k-means clusters (HuBERT): the codebook a run trains with.

A HuBERT run given no `--override codebook=DIR` gets the target stage's codebook for its training
shards (`pipeline.targets.ensure_codebook`, iteration 1: k-means on MFCCs): reused from
`<shards>/targets/` when one was fitted with the same settings, fitted now (on the driver, before Ray
starts the workers) otherwise. The folder then travels as an override (an absolute path the workers
read, or a bucket URI each machine copies down: `pipeline.targets.stored_codebook`); every checkpoint
carries a copy of it (`pipeline.checkpoint.CODEBOOK_DIR`) for evaluation.

The automatic codebook is HuBERT's iteration 1 (MFCC, k 100) for every size. The HuBERT paper trains
Large / X-Large on k 500 clusters of a second-iteration Base's layer 9: give such a codebook with
`--override codebook=DIR` (`python -m pipeline.targets --features hubert --teacher CKPT ...`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.model_facts import ModelFacts
from pipeline.shards.location import is_uri


def with_codebook(config: PretrainConfig, model: ModelFacts, shards_dir: str) -> tuple[PretrainConfig, ModelFacts]:
    """`config` and `model` unchanged unless the model needs a codebook and was given none."""
    if not model.needs_codebook or "codebook" in config.model.model_overrides:
        return config, model
    from pipeline.targets.codebook import ensure_codebook

    # Shards in a bucket keep their codebook in the bucket, where every worker finds it.
    where = shards_dir if is_uri(shards_dir) else Path(shards_dir).absolute()
    directory = ensure_codebook(where, crop_frames=model.spec.crop_frames)
    print(
        f"targets: {config.model.model_name} predicts the clusters of {directory} (HuBERT iteration 1: MFCC, k 100; "
        "--override codebook=DIR for another)",
        file=sys.stderr,
        flush=True,
    )
    config = config.replace(model_overrides={**config.model.model_overrides, "codebook": str(directory)})
    return config, config.describe_model()
