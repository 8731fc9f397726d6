"""Readers shared by the cluster-file tests (everything offline: no cloud SDK, no cluster)."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER_DIR = REPO_ROOT / "cluster"
RAY_IMAGE = "rayproject/ray:2.60.0-py311-gpu"


def load_yaml_documents(path: Path) -> list[dict]:
    """Every document of a (possibly multi-document) YAML file."""
    with path.open() as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc is not None]


def read_required_packages() -> list[str]:
    """The requirement specifiers of requirements.txt ("torch==2.9.1", "numpy>=1.26", ...)."""
    lines = (REPO_ROOT / "requirements.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]
