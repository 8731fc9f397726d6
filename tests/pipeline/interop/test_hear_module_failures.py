"""A HEAR module that raises is named first, in one stderr line with its error, exit code 2; --debug
shows its own traceback. Before, a ValueError from `load_model` printed `evaluate: error: bad config`
(naming no module) and a RuntimeError printed a traceback through our code."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.pipeline.cli.test_errors import assert_one_line_error
from tests.support.hear_task_fixtures import build_tiny_tasks

MODULES = {
    # load_model refuses its configuration, as a module checking its --model-file would.
    "bad_config_hear": "def load_model(model_file_path=''):\n    raise ValueError('bad config')\n\n"
    "def get_scene_embeddings(audio, model):\n    return audio\n",
    # load_model fails on something of its own (a CUDA call, a missing download).
    "crashing_hear": "def load_model(model_file_path=''):\n    raise RuntimeError('weights server unreachable')\n\n"
    "def get_scene_embeddings(audio, model):\n    return audio\n",
    # loads, then fails on the first audio it embeds.
    "failing_embed_hear": "class Model:\n    sample_rate = 16000\n    scene_embedding_size = 4\n\n"
    "def load_model(model_file_path=''):\n    return Model()\n\n"
    "def get_scene_embeddings(audio, model):\n    raise RuntimeError('out of memory on the toy device')\n",
}


@pytest.fixture(scope="module")
def modules_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hear_modules")
    for name, source in MODULES.items():
        (folder / f"{name}.py").write_text(source)
    return folder


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    return build_tiny_tasks(tmp_path_factory.mktemp("tasks"), clips_per_class={"train": 2, "valid": 1, "test": 1})


def _evaluate_module(module: str, modules_dir, tasks_dir, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{modules_dir}"}
    argv = ["--hear-module", module, "--tasks-dir", str(tasks_dir), "--no-mlflow", "--probe", "linear", *extra]
    return subprocess.run(
        [sys.executable, "-m", "pipeline.evaluate", *argv],
        capture_output=True, text=True, timeout=120, env=env, cwd=REPO_ROOT,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("module", "says"),
    [
        ("bad_config_hear", "load_model raised ValueError: bad config"),
        ("crashing_hear", "load_model raised RuntimeError: weights server unreachable"),
        ("failing_embed_hear", "get_scene_embeddings raised RuntimeError: out of memory on the toy device"),
    ],
)
def test_the_failing_module_is_named_first_with_its_error(module, says, modules_dir, tasks_dir):
    completed = _evaluate_module(module, modules_dir, tasks_dir)
    assert_one_line_error(completed, f"python -m pipeline.evaluate: error: --hear-module {module}: {says}")


def test_debug_shows_the_modules_own_traceback(modules_dir, tasks_dir):
    completed = _evaluate_module("bad_config_hear", modules_dir, tasks_dir, "--debug")
    assert completed.returncode != 0 and "Traceback" in completed.stderr
    assert str(modules_dir / "bad_config_hear.py") in completed.stderr and "ValueError: bad config" in completed.stderr
