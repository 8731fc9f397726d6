"""The toy HEAR module (tests/support/toy_hear_module.py), slowed to `CALL_S` seconds a call.

A real large model takes seconds per `get_scene_embeddings` call on a CPU; this one sleeps, so a
test can watch what a person sees while such a model is scored, in a few seconds of wall time.
"""

from __future__ import annotations

import time

import torch

from tests.support import toy_hear_module

CALL_S = 0.3


def load_model(model_file_path: str = "") -> toy_hear_module.ToyModel:
    return toy_hear_module.load_model(model_file_path)


def get_scene_embeddings(audio: torch.Tensor, model: toy_hear_module.ToyModel) -> torch.Tensor:
    time.sleep(CALL_S)
    return toy_hear_module.get_scene_embeddings(audio, model)
