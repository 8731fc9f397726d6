"""`--rankme-shards` must hold the input the checkpoint's model reads: its front end and bin count.

The pool R is measured on and the crops the readout calibrates on are drawn from these shards and
fed to the model as they are stored (no front end runs in between). Shards made with another preset
(64-bin `dasheng` log-mels for a model trained on 80-bin `audiomae` ones) used to fail inside the
model's forward pass, after the checkpoint was loaded, with a shape that named neither the flag nor
the folder. The manifest says what the shards hold, so the mismatch is refused before any crop is read.
The shards a checkpoint recorded are its training's own, already held to its model by pretraining.
"""

from __future__ import annotations

from typing import Any

from pipeline.cli.errors import UserError
from pipeline.shards.format import read_manifest


def check_rankme_shards_fit(rankme_shards: str, model_spec: Any) -> None:
    """Refuse `--rankme-shards` whose preset or bins differ from what `model_spec` expects."""
    try:
        manifest = read_manifest(rankme_shards)
    except (FileNotFoundError, ValueError) as error:  # no manifest, or a damaged one: named by read_manifest
        raise UserError(f"--rankme-shards {rankme_shards}: {error}") from None
    preset = manifest.get("preset") or {}
    bins, preset_name = manifest.get("n_mels"), preset.get("name")
    if preset_name == model_spec.frontend_preset and bins == model_spec.n_mels:
        return
    what = "log-mels" if preset.get("kind", "log_mel") == "log_mel" else "frames"
    raise UserError(
        f"--rankme-shards {rankme_shards}: the shards hold {bins}-bin '{preset_name}' {what}, but the checkpoint's "
        f"model {model_spec.name} reads {model_spec.n_mels}-bin '{model_spec.frontend_preset}' input; pass shards "
        f"made with `python -m pipeline.prep --preset {model_spec.frontend_preset} ...`, or leave --rankme-shards "
        "out to use the shards the checkpoint was trained on"
    )
