"""Any Python module implementing the HEAR 2021 common API, loaded and called the way HEAR's harness does.

The API (https://hearbenchmark.com/hear-api.html): `load_model(model_file_path="")` returns a model
with integer attributes `sample_rate` and `scene_embedding_size`; `get_scene_embeddings(audio, model)`
takes a float32 torch tensor (n_sounds, n_samples) at `model.sample_rate` and returns
(n_sounds, scene_embedding_size). Only these are needed: RankMe and the scene probes use scene
embeddings, so `get_timestamp_embeddings` is not required here.

A module that cannot be imported, lacks one of the functions or returns a model without the
attributes is refused with one line naming the module and what is missing (a `UserError`, exit 2);
one whose import, `load_model` or `get_scene_embeddings` raises is named the same way, with the
call and its error (`--hear-module NAME: load_model raised ValueError: ...`).
Audio is given in batches of sounds of one length (HEAR's own tasks have a fixed length; ours may
not, and padding would change the sounds), in the order asked for.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline.cli.errors import UserError

REQUIRED_FUNCTIONS = ("load_model", "get_scene_embeddings")
REQUIRED_ATTRIBUTES = ("sample_rate", "scene_embedding_size")
# Sounds per get_scene_embeddings call: bounded memory for 10 s clips of a large model.
DEFAULT_BATCH_SOUNDS = 16


@dataclass(frozen=True)
class HearModule:
    """A loaded HEAR module: its name, the model `load_model` returned and what identifies the weights."""

    name: str
    module: Any
    model: Any
    model_file: str  # as given ("" when none)
    model_file_digest: str  # sha256 of the file (of every file, for a directory); "" when none

    @property
    def sample_rate_hz(self) -> int:
        return int(self.model.sample_rate)

    @property
    def embedding_size(self) -> int:
        return int(self.model.scene_embedding_size)

    def scene_embeddings(
        self,
        waves: Sequence[np.ndarray],
        *,
        batch_sounds: int = DEFAULT_BATCH_SOUNDS,
        on_call: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """float32 (len(waves), embedding_size) of 1-D waveforms at `sample_rate_hz`, in their order.
        `on_call(n)` after each call of the module, with the n sounds it embedded (progress by time)."""
        result = np.empty((len(waves), self.embedding_size), dtype=np.float32)
        by_length: dict[int, list[int]] = {}
        for index, wave in enumerate(waves):
            by_length.setdefault(len(wave), []).append(index)
        for indices in by_length.values():
            for start in range(0, len(indices), batch_sounds):
                chosen = indices[start : start + batch_sounds]
                audio = torch.from_numpy(np.stack([np.asarray(waves[i], dtype=np.float32) for i in chosen]))
                result[chosen] = self._call(audio)
                if on_call is not None:
                    on_call(len(chosen))
        return result

    def _call(self, audio: torch.Tensor) -> np.ndarray:
        try:
            with torch.inference_mode():
                output = self.module.get_scene_embeddings(audio, self.model)
        except Exception as error:  # noqa: BLE001 - whatever the module raises is the module's failure
            given = f"it was called with float32 audio of shape {tuple(audio.shape)} at {self.sample_rate_hz} Hz"
            raise module_failed(self.name, "get_scene_embeddings", error, f"{given}; check the module") from error
        array = (
            output.detach().to("cpu", torch.float32).numpy()
            if isinstance(output, torch.Tensor)
            else np.asarray(output, np.float32)
        )
        if array.shape != (len(audio), self.embedding_size):
            raise UserError(
                f"HEAR module {self.name}: get_scene_embeddings returned shape {array.shape} for {len(audio)} sounds; "
                f"the API asks for ({len(audio)}, scene_embedding_size={self.embedding_size})"
            )
        if not np.all(np.isfinite(array)):
            raise UserError(f"HEAR module {self.name}: get_scene_embeddings returned NaN or infinite values")
        return array


# Where audioscale's own HEAR module lived before the interop room: named in scripts users wrote.
MOVED_MODULES = {"pipeline.evaluate.hear_api": "pipeline.interop.hear_api"}


def import_hear_module(name: str) -> Any:
    """The module `name` (dotted, importable), checked for the API's functions."""
    if name in MOVED_MODULES:
        raise UserError(f"--hear-module {name} has moved: use --hear-module {MOVED_MODULES[name]}")
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        raise UserError(
            f"--hear-module {name}: no module {error.name!r} can be imported; install the package or add its "
            "folder to PYTHONPATH"
        ) from None
    except Exception as error:  # noqa: BLE001 - its own code failed while importing
        raise module_failed(name, "importing it", error, "fix the module") from error
    missing = [function for function in REQUIRED_FUNCTIONS if not callable(getattr(module, function, None))]
    if missing:
        raise UserError(
            f"--hear-module {name} is not a HEAR module: it has no {' or '.join(missing)} function (HEAR API)"
        )
    return module


def load_hear_module(name: str, model_file: str = "") -> HearModule:
    """Import `name`, call its `load_model(model_file)` and check the model's attributes."""
    if model_file and not Path(model_file).exists():
        raise UserError(f"--model-file {model_file} does not exist")
    module = import_hear_module(name)
    try:
        model = module.load_model(model_file) if model_file else module.load_model()
    except Exception as error:  # noqa: BLE001 - a bad config, a failed download: the module's own failure
        what_to_do = f"check --model-file {model_file} and the module" if model_file else "check the module"
        raise module_failed(name, "load_model", error, what_to_do) from error
    missing = [attribute for attribute in REQUIRED_ATTRIBUTES if not isinstance(getattr(model, attribute, None), int)]
    if missing:
        raise UserError(
            f"--hear-module {name}: load_model returned a model without integer {' and '.join(missing)} (HEAR API)"
        )
    if model.sample_rate <= 0 or model.scene_embedding_size <= 0:
        raise UserError(f"--hear-module {name}: sample_rate and scene_embedding_size must be positive")
    return HearModule(
        name=name,
        module=module,
        model=model,
        model_file=model_file,
        model_file_digest=file_digest(model_file) if model_file else "",
    )


def module_failed(name: str, where: str, error: Exception, what_to_do: str) -> UserError:
    """The user's module raised: one line naming it first, then the call and its error. The module's
    own traceback stays on the error (`from error`), so --debug shows where in the module it failed."""
    message = " ".join(str(error).split())[:300]
    said = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return UserError(f"--hear-module {name}: {where} raised {said}; {what_to_do} (the error is the module's own)")


def file_digest(path: str | Path) -> str:
    """sha256 of a file; for a directory, of every file's relative path and bytes in sorted order."""
    root = Path(path)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for file in files:
        if root.is_dir():
            digest.update(file.relative_to(root).as_posix().encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
