"""Pretraining checkpoints: a plain directory that loads without unpickling arbitrary objects.

Layout (the contract other stages read):
- `model.safetensors`: the model's state_dict (bare module: no DDP / torch.compile prefixes).
- `model.json`: {"model_name", "overrides", "frontend_preset", "crop_frames", "step",
  "shard_fingerprint", "code_version", ...extra}: enough to rebuild the model with
  `models.build_model(model_name, **overrides)` and to know which data and code produced it.
- `train_state.pt`: optimizer, scheduler, step and RNG state for resuming; only tensors, numbers,
  strings, lists and dicts, so `torch.load(weights_only=True)` reads it.
- `model.json["sha256"]`: {file name: sha256} of the two files above, taken when they were written
  and checked before they are loaded, so a truncated or partly overwritten file is an error naming
  it instead of weights that load silently (safetensors checks only the header's offsets). Hashing
  runs at ~1 GB/s, well under a second for the study's largest model.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch
from torch import nn

from pipeline.tracking.setup import code_version

WEIGHTS_FILE = "model.safetensors"
META_FILE = "model.json"
CODEBOOK_DIR = "codebook"  # a HuBERT checkpoint's copy of the k-means codebook it was trained with
TRAIN_STATE_FILE = "train_state.pt"
DIGESTS_KEY = "sha256"
# Each digested file's size: a checkpoint in a bucket is checked by one listing (an upload cut short
# leaves a different size) without copying gigabytes down; the sha256 is checked where it is read.
SIZES_KEY = "bytes"


class CheckpointError(ValueError):
    """A checkpoint directory that is missing files, is damaged or does not match its model: a file the
    user gave, so a user error at the command line (one line, exit 2; pipeline.cli.errors)."""


def unwrap_model(model: nn.Module) -> nn.Module:
    """The bare module under DDP (`.module`) and torch.compile (`._orig_mod`) wrappers."""
    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


def save_model_checkpoint(
    directory: str | Path,
    model: nn.Module,
    *,
    model_name: str,
    overrides: dict[str, Any],
    step: int,
    shard_fingerprint: str,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write `model.safetensors` and `model.json` into `directory` (created if missing)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bare = unwrap_model(model)
    spec = getattr(bare, "spec", None)
    meta = {
        "model_name": model_name,
        "overrides": dict(overrides),
        "frontend_preset": getattr(spec, "frontend_preset", None),
        "crop_frames": getattr(spec, "crop_frames", None),
        "step": int(step),
        "shard_fingerprint": shard_fingerprint,
        "code_version": code_version(),
    }
    clashes = (set(meta) | {DIGESTS_KEY, SIZES_KEY}) & set(extra or {})
    if clashes:
        raise ValueError(f"extra checkpoint metadata may not overwrite the contract keys {sorted(clashes)}")
    meta.update(extra or {})
    _bundle_codebook(directory, overrides.get("codebook"))
    # save_model drops the duplicate names of tied tensors, which save_file would refuse.
    safetensors.torch.save_model(bare, str(directory / WEIGHTS_FILE), force_contiguous=True)
    meta[DIGESTS_KEY] = {WEIGHTS_FILE: file_sha256(directory / WEIGHTS_FILE)}
    meta[SIZES_KEY] = {WEIGHTS_FILE: (directory / WEIGHTS_FILE).stat().st_size}
    _write_meta(directory, meta)
    return directory


def _bundle_codebook(directory: Path, codebook: str | None) -> None:
    """A HuBERT checkpoint carries a copy of its codebook folder (`CODEBOOK_DIR`), so evaluation, the HEAR
    API and the next target iteration rebuild it on any machine, after the shards' `targets/` is gone.
    Iteration 1's folder is a few kB; iteration 2's also holds the teacher's layers."""
    if not codebook or not Path(codebook).is_dir():
        return
    shutil.copytree(codebook, directory / CODEBOOK_DIR, dirs_exist_ok=True)


def file_sha256(path: str | Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _write_meta(directory: Path, meta: dict[str, Any]) -> None:
    # Through a temporary name: a crash mid-write leaves the previous model.json, never half of one.
    temporary = directory / (META_FILE + ".tmp")
    temporary.write_text(json.dumps(meta, indent=2, sort_keys=True))
    temporary.replace(directory / META_FILE)


def verify_checkpoint_file(directory: str | Path, name: str) -> None:
    """Raise `CheckpointError` naming the file when `name` is missing or differs from the digest
    recorded at save time; warn when the checkpoint predates digests (nothing to check against)."""
    path = Path(directory) / name
    if not path.is_file():
        raise CheckpointError(f"{path} is missing: the checkpoint {directory} is incomplete")
    expected = read_checkpoint_meta(directory).get(DIGESTS_KEY, {}).get(name)
    if expected is None:
        warnings.warn(
            f"{path} has no sha256 recorded in {META_FILE} (saved by an older version); loading it unverified",
            stacklevel=3,
        )
        return
    actual = file_sha256(path)
    if actual != expected:
        raise CheckpointError(
            f"{path} is damaged: its sha256 {actual[:16]} ({path.stat().st_size} bytes) differs from the "
            f"{expected[:16]} recorded in {META_FILE} when it was saved (truncated or overwritten since). "
            "Resume from an earlier checkpoint (delete this checkpoint folder) or train again."
        )


def verify_checkpoint(directory: str | Path) -> None:
    """Every file a resume reads: model.json parses, weights and train state match their digests."""
    for name in (WEIGHTS_FILE, TRAIN_STATE_FILE):
        verify_checkpoint_file(directory, name)


def read_checkpoint_meta(directory: str | Path) -> dict[str, Any]:
    """The `model.json` of a checkpoint, with a clear error when the directory is not one."""
    path = Path(directory) / META_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{directory} is not a model checkpoint: {META_FILE} is missing "
            "(pass the directory that `python -m pipeline.pretrain` reported as the checkpoint)"
        )
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{path} is damaged (not valid JSON: {error}); use another checkpoint") from None


def load_model_weights(model: nn.Module, directory: str | Path) -> None:
    """Load `model.safetensors` into an already built model (strict: every key must match)."""
    path = Path(directory) / WEIGHTS_FILE
    if not path.is_file():
        raise CheckpointError(f"{directory} has no {WEIGHTS_FILE}")
    verify_checkpoint_file(directory, WEIGHTS_FILE)
    bare = unwrap_model(model)
    device = next(bare.parameters()).device
    missing, unexpected = safetensors.torch.load_model(bare, str(path), strict=False, device=str(device))
    if missing or unexpected:
        raise CheckpointError(
            f"{path} does not match the model: missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}; "
            "was it written by a different model name or overrides?"
        )


def load_model_from_checkpoint(directory: str | Path, *, device: str = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """Rebuild the model named in `model.json`, load its weights; returns (model in eval mode, meta)."""
    import models

    meta = read_checkpoint_meta(directory)
    overrides = dict(meta["overrides"])
    if (Path(directory) / CODEBOOK_DIR / "codebook.json").is_file():  # the checkpoint's own copy
        overrides["codebook"] = str(Path(directory) / CODEBOOK_DIR)
    model = models.build_model(meta["model_name"], **overrides).to(device)
    load_model_weights(model, directory)
    return model.eval(), meta


def capture_rng_state() -> dict[str, Any]:
    """Python, NumPy and torch RNG states as weights_only-loadable values."""
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "kind": np_kind,
            "keys": torch.from_numpy(np_keys.astype(np.int64)),
            "pos": int(np_pos),
            "has_gauss": int(np_has_gauss),
            "gauss": float(np_gauss),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of `capture_rng_state`."""
    random.setstate(_as_tuples(state["python"]))
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["kind"],
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["gauss"],
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuples(value: Any) -> Any:
    # random.setstate wants the nested tuples back that a round trip may have turned into lists.
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def save_train_state(
    directory: str | Path,
    *,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    step: int,
    rng_state: dict[str, Any] | None = None,
    data_position: dict[str, int] | None = None,
) -> Path:
    """Write `train_state.pt`: what resuming needs beyond the weights (`data_position`: where the
    training stream stood, `pipeline.shards.crop_stream.StreamPosition` plus the world size)."""
    path = Path(directory) / TRAIN_STATE_FILE
    torch.save(
        {
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "step": int(step),
            "rng": rng_state if rng_state is not None else capture_rng_state(),
            **({"data_position": {k: int(v) for k, v in data_position.items()}} if data_position else {}),
        },
        path,
    )
    meta_path = Path(directory) / META_FILE
    if meta_path.is_file():  # the digest joins the weights' in model.json (saved first by the loop)
        meta = json.loads(meta_path.read_text())
        meta.setdefault(DIGESTS_KEY, {})[TRAIN_STATE_FILE] = file_sha256(path)
        meta.setdefault(SIZES_KEY, {})[TRAIN_STATE_FILE] = Path(path).stat().st_size
        _write_meta(Path(directory), meta)
    return path


def load_train_state(directory: str | Path) -> dict[str, Any]:
    """`train_state.pt` read with weights_only=True (no arbitrary unpickling)."""
    path = Path(directory) / TRAIN_STATE_FILE
    if not path.is_file():
        raise CheckpointError(f"{directory} has no {TRAIN_STATE_FILE}: it cannot be resumed from")
    if (Path(directory) / META_FILE).is_file():
        verify_checkpoint_file(directory, TRAIN_STATE_FILE)
    return torch.load(path, map_location="cpu", weights_only=True)
