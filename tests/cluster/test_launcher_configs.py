"""`ray up` YAMLs pass Ray's own config preparation and schema validation, and say what we rely on."""

from __future__ import annotations

import configparser
import copy
import importlib.util
import os
import re
import shlex
import subprocess
from pathlib import Path

import jsonschema
import pytest
import ray
import yaml
from cluster_file_readers import CLUSTER_DIR, RAY_IMAGE, read_required_packages
from ray.autoscaler._private.util import prepare_config, validate_config

from cluster.rehearsal.tracking_server import AUTH_CACHE_TTL_S

LAUNCHER_FILES = sorted((CLUSTER_DIR / "ray-up").glob("*.yaml"))


def load_launcher(path) -> dict:
    return yaml.safe_load(path.read_text())


def prepared(path) -> dict:
    """What `ray up` would run with: the file merged with the provider's defaults, then validated."""
    config = prepare_config(load_launcher(path))
    validate_config(config)
    return config


def test_there_is_a_launcher_for_aws_and_for_gcp():
    providers = {load_launcher(path)["provider"]["type"] for path in LAUNCHER_FILES}
    assert providers == {"aws", "gcp"}


@pytest.mark.parametrize("path", LAUNCHER_FILES, ids=lambda p: p.name)
def test_launcher_passes_ray_config_validation(path):
    config = prepared(path)
    assert config["head_node_type"] in config["available_node_types"]


@pytest.mark.parametrize("path", LAUNCHER_FILES, ids=lambda p: p.name)
def test_validation_rejects_a_broken_copy_of_the_launcher(path):
    # Proves the check has teeth: Ray's schema requires `resources` on every node type.
    broken = copy.deepcopy(load_launcher(path))
    gpu_type = next(name for name in broken["available_node_types"] if name.startswith("gpu"))
    del broken["available_node_types"][gpu_type]["resources"]
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(broken))


@pytest.mark.parametrize("path", LAUNCHER_FILES, ids=lambda p: p.name)
def test_gpu_worker_types_declare_cpus_and_gpus(path):
    # GCP never detects accelerators; on AWS explicit numbers keep the autoscaler off the EC2 API.
    config = prepared(path)
    node_types = config["available_node_types"]
    gpu_types = {name: spec for name, spec in node_types.items() if name != config["head_node_type"]}
    assert gpu_types, "no worker node types"
    for name, spec in gpu_types.items():
        assert spec["resources"].get("GPU", 0) >= 1, name
        assert spec["resources"].get("CPU", 0) >= spec["resources"]["GPU"], name
        assert spec["max_workers"] >= 1, name


@pytest.mark.parametrize("path", LAUNCHER_FILES, ids=lambda p: p.name)
def test_launcher_runs_the_pinned_ray_image_matching_the_installed_ray(path):
    config = prepared(path)
    assert config["docker"]["image"] == RAY_IMAGE
    image_ray_version = re.match(r"rayproject/ray:([\d.]+)-", RAY_IMAGE).group(1)
    assert image_ray_version == ray.__version__


@pytest.mark.parametrize("path", LAUNCHER_FILES, ids=lambda p: p.name)
def test_launcher_installs_every_requirement_pin(path):
    setup = " ".join(prepared(path)["setup_commands"])
    installed = set(shlex.split(setup))
    missing = [package for package in read_required_packages() if package not in installed]
    assert not missing, f"{path.name} setup_commands lack {missing}"


@pytest.mark.parametrize("path", LAUNCHER_FILES, ids=lambda p: p.name)
def test_every_ray_process_starts_in_token_auth_mode(path):
    config = prepared(path)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = next(command for command in config[key] if "ray start" in command)
        assert "export RAY_AUTH_MODE=token;" in start, key
    assert "~/.ray/auth_token" in config["file_mounts"]


@pytest.mark.parametrize("path", LAUNCHER_FILES, ids=lambda p: p.name)
def test_head_serves_mlflow_with_a_database_and_a_bucket_for_artifacts(path):
    config = prepared(path)
    head_commands = " ".join(config["head_start_ray_commands"])
    bucket_scheme = {"aws": "s3://", "gcp": "gs://"}[config["provider"]["type"]]
    assert "mlflow server" in head_commands
    assert "--backend-store-uri sqlite:////" in head_commands  # absolute path on the head
    assert f"--artifacts-destination {bucket_scheme}" in head_commands
    assert "MLFLOW_TRACKING_URI=http://" in head_commands  # drivers on the head inherit it


def _read_auth_config(ini_path) -> dict[str, str]:
    """The auth config's [mlflow] section; every key must be one of MLflow's own basic_auth.ini, whose
    admin_password and cache lines ship commented out (importing the auth app needs Flask-WTF, absent here)."""
    shipped = configparser.ConfigParser()
    shipped_text = (
        Path(importlib.util.find_spec("mlflow").origin).parent / "server" / "auth" / "basic_auth.ini"
    ).read_text()
    for key in ("admin_password", "auth_cache_ttl_seconds"):
        shipped_text = shipped_text.replace(f"# {key} =", f"{key} =")
    shipped.read_string(shipped_text)
    written = configparser.ConfigParser()
    written.read(ini_path)
    assert set(written["mlflow"]) <= set(shipped["mlflow"]), set(written["mlflow"]) - set(shipped["mlflow"])
    return dict(written["mlflow"])


@pytest.mark.parametrize("path", LAUNCHER_FILES, ids=lambda p: p.name)
def test_mlflow_server_requires_a_password_every_node_has(path, tmp_path):
    config = prepared(path)
    (server,) = [command for command in config["head_start_ray_commands"] if "mlflow server" in command]
    assert "mlflow server --app-name basic-auth" in server
    assert "~/.mlflow/admin_password" in config["file_mounts"]  # copied to every node, never in the file
    assert any("Flask-WTF" in command for command in config["head_setup_commands"])  # the mlflow[auth] extra
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = next(command for command in config[key] if "ray start" in command)
        assert "MLFLOW_TRACKING_PASSWORD=$(cat ~/.mlflow/admin_password)" in start, key
    # Run the head's own command that writes the auth config, with a fake home, and read it as MLflow does.
    writer = server[server.index("printf") : server.index("basic_auth.ini;") + len("basic_auth.ini")]
    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "admin_password").write_text("s3cret\n")
    (tmp_path / "mlflow").mkdir()
    subprocess.run(["bash", "-c", writer], env={**os.environ, "HOME": str(tmp_path)}, check=True)
    auth = _read_auth_config(tmp_path / "mlflow" / "basic_auth.ini")
    assert (auth["admin_username"], auth["admin_password"], auth["default_permission"]) == ("admin", "s3cret", "READ")
    assert auth["database_uri"] == "sqlite:////home/ray/mlflow/basic_auth.db"  # beside the run database on the head
    # Checked passwords cached as in the rehearsal's server (uncached, a trial's tracking calls take seconds).
    assert int(auth["auth_cache_ttl_seconds"]) == AUTH_CACHE_TTL_S > 0
