"""KubeRay manifests: schema derived from the ray.io/v1 CRDs, plus what the pretraining run needs."""

from __future__ import annotations

import argparse
import copy
import json
import shlex
from pathlib import Path
from urllib.parse import urlparse

import jsonschema
import pytest
import ray
import yaml
from cluster_file_readers import (
    CLUSTER_DIR,
    RAY_IMAGE,
    load_yaml_documents,
    read_required_packages,
)

from cluster.rehearsal.tracking_server import AUTH_CACHE_TTL_S
from pipeline.pretrain.__main__ import build_parser, config_from_args

KUBERAY_DIR = CLUSTER_DIR / "kuberay"
RAY_MANIFESTS = [KUBERAY_DIR / "raycluster.yaml", KUBERAY_DIR / "rayjob-pretrain.yaml"]
SCHEMA = json.loads((Path(__file__).parent / "kuberay_v1_schema.json").read_text())


def load_manifest(path) -> dict:
    (document,) = load_yaml_documents(path)
    return document


def validate_against_crd_schema(manifest: dict) -> None:
    jsonschema.validate(manifest, SCHEMA, cls=jsonschema.Draft202012Validator)


def cluster_spec(manifest: dict) -> dict:
    return manifest["spec"]["rayClusterSpec"] if manifest["kind"] == "RayJob" else manifest["spec"]


def all_ray_containers(manifest: dict) -> list[dict]:
    spec = cluster_spec(manifest)
    groups = [spec["headGroupSpec"], *spec.get("workerGroupSpecs", [])]
    return [container for group in groups for container in group["template"]["spec"]["containers"]]


def parse_entrypoint(entrypoint: str) -> tuple[list[str], argparse.Namespace]:
    """Split 'python -m pipeline.pretrain --model ...' and parse its flags with the real CLI parser.

    An unknown flag exits (SystemExit fails the test); the config's own checks (batch divisible by
    workers, positive steps, ...) run too.
    """
    tokens = shlex.split(entrypoint)
    command, flags = tokens[:3], tokens[3:]
    args = build_parser().parse_args(flags)
    config_from_args(args)
    return command, args


def mlflow_objects() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in load_yaml_documents(KUBERAY_DIR / "mlflow.yaml")}


def test_kuberay_schema_is_itself_valid():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", RAY_MANIFESTS, ids=lambda p: p.name)
def test_manifest_matches_kuberay_v1_schema(path):
    validate_against_crd_schema(load_manifest(path))


@pytest.mark.parametrize(
    "break_it",
    [
        lambda m: m.update(apiVersion="ray.io/v1alpha1"),
        lambda m: cluster_spec(m)["headGroupSpec"]["rayStartParams"].update({"num-cpus": 0}),  # must be a string
        lambda m: cluster_spec(m).update(workerGroupSpec=cluster_spec(m).pop("workerGroupSpecs")),  # typo
        lambda m: cluster_spec(m)["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"][
            "limits"
        ].update({"nvidia.com/gpu": "one"}),
    ],
    ids=["old-api-version", "non-string-start-param", "misspelt-field", "bad-quantity"],
)
@pytest.mark.parametrize("path", RAY_MANIFESTS, ids=lambda p: p.name)
def test_schema_rejects_broken_copies(path, break_it):
    manifest = copy.deepcopy(load_manifest(path))
    break_it(manifest)
    with pytest.raises(jsonschema.ValidationError):
        validate_against_crd_schema(manifest)


@pytest.mark.parametrize("path", RAY_MANIFESTS, ids=lambda p: p.name)
def test_ray_pods_use_the_pinned_image_and_token_auth(path):
    manifest = load_manifest(path)
    assert cluster_spec(manifest)["rayVersion"] == ray.__version__
    assert {container["image"] for container in all_ray_containers(manifest)} == {RAY_IMAGE}
    assert cluster_spec(manifest)["authOptions"]["mode"] == "token"


@pytest.mark.parametrize("path", RAY_MANIFESTS, ids=lambda p: p.name)
def test_every_worker_group_requests_gpus(path):
    for group in cluster_spec(load_manifest(path))["workerGroupSpecs"]:
        for container in group["template"]["spec"]["containers"]:
            limits = container["resources"]["limits"]
            assert int(limits["nvidia.com/gpu"]) >= 1, group["groupName"]
            # Kubernetes requires GPU requests (when given) to equal limits.
            assert (
                container["resources"]["requests"].get("nvidia.com/gpu", limits["nvidia.com/gpu"])
                == limits["nvidia.com/gpu"]
            )


def test_rayjob_entrypoint_runs_pretraining_on_gpus_with_shared_storage_and_tracking():
    manifest = load_manifest(KUBERAY_DIR / "rayjob-pretrain.yaml")
    command, args = parse_entrypoint(manifest["spec"]["entrypoint"])
    assert command == ["python", "-m", "pipeline.pretrain"]
    assert args.use_gpu is True
    assert args.model == "audiomae++-base"
    # Multi-node runs need storage every node can reach: an object store, not a pod's disk.
    assert urlparse(args.shards).scheme in {"s3", "gs"}
    assert urlparse(args.storage_path).scheme in {"s3", "gs"}
    assert args.run_name, "a fixed run name lets a re-applied RayJob resume"

    # The run's workers fit on the job's cluster: one GPU per Ray Train worker.
    total_gpus = sum(
        group["replicas"] * int(group["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        for group in cluster_spec(manifest)["workerGroupSpecs"]
    )
    assert 1 <= args.num_workers <= total_gpus


def test_tracking_uri_points_at_the_mlflow_service():
    service = mlflow_objects()["Service"]
    service_url = f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    rayjob = load_manifest(KUBERAY_DIR / "rayjob-pretrain.yaml")
    _, args = parse_entrypoint(rayjob["spec"]["entrypoint"])
    assert args.tracking_uri == service_url
    runtime_env = yaml.safe_load((CLUSTER_DIR / "runtime-env.yaml").read_text())
    assert runtime_env["env_vars"]["MLFLOW_TRACKING_URI"] == service_url
    for path in RAY_MANIFESTS:
        for container in all_ray_containers(load_manifest(path)):
            env = {var["name"]: var.get("value") for var in container.get("env", [])}
            assert env.get("MLFLOW_TRACKING_URI") == service_url, (path.name, container["name"])


def test_mlflow_server_has_a_database_an_artifact_bucket_and_the_pinned_version():
    objects = mlflow_objects()
    pod_spec = objects["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    command = " ".join(container["command"] + container["args"])
    assert "mlflow server" in command
    assert "--backend-store-uri sqlite:////mlflow/" in command
    assert any(mount["mountPath"] == "/mlflow" for mount in container["volumeMounts"])
    claim = next(volume for volume in pod_spec["volumes"] if "persistentVolumeClaim" in volume)
    assert claim["persistentVolumeClaim"]["claimName"] == objects["PersistentVolumeClaim"]["metadata"]["name"]
    artifacts = shlex.split(command)[shlex.split(command).index("--artifacts-destination") + 1]
    assert urlparse(artifacts).scheme in {"s3", "gs"}
    mlflow_pin = next(p for p in read_required_packages() if p.startswith("mlflow=="))
    assert f'"{mlflow_pin}"' in command
    assert objects["Service"]["spec"]["selector"] == objects["Deployment"]["spec"]["selector"]["matchLabels"]


def test_runtime_envs_install_every_requirement_pin_and_agree():
    cluster_env = yaml.safe_load((CLUSTER_DIR / "runtime-env.yaml").read_text())
    rayjob = load_manifest(KUBERAY_DIR / "rayjob-pretrain.yaml")
    job_env = yaml.safe_load(rayjob["spec"]["runtimeEnvYAML"])
    assert job_env["pip"] == cluster_env["pip"]
    assert job_env["env_vars"] == cluster_env["env_vars"]
    missing = [package for package in read_required_packages() if package not in cluster_env["pip"]["packages"]]
    assert not missing, f"runtime-env.yaml lacks {missing}"
    assert job_env["working_dir"].endswith(".zip")  # the code travels with the job


def test_every_pod_uses_the_storage_service_account():
    (account,) = load_yaml_documents(KUBERAY_DIR / "storage-access.yaml")
    pod_specs = [mlflow_objects()["Deployment"]["spec"]["template"]["spec"]]
    for path in RAY_MANIFESTS:
        spec = cluster_spec(load_manifest(path))
        pod_specs += [group["template"]["spec"] for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]]
    assert {pod["serviceAccountName"] for pod in pod_specs} == {account["metadata"]["name"]}


def test_pretrain_commands_in_the_cluster_readme_parse():
    readme = (CLUSTER_DIR / "README.md").read_text()
    code_blocks = readme.split("```")[1::2]
    shell_lines = "\n".join(code_blocks).replace("\\\n", " ").splitlines()  # join continued lines
    commands = [
        line[line.index("python -m pipeline.pretrain") :]
        for line in shell_lines
        if "python -m pipeline.pretrain" in line
    ]
    # The rehearsal's run ("Rehearse on one machine") is a CPU run against a store on loopback.
    commands = [command for command in commands if "endpoint_override=127.0.0.1" not in command]
    assert len(commands) >= 2, "expected the ray up and the KubeRay submit commands"
    for command in commands:
        _, args = parse_entrypoint(command)
        assert args.use_gpu and urlparse(args.storage_path).scheme in {"s3", "gs"}, command


def test_mlflow_server_requires_a_password_from_a_secret_and_every_ray_container_has_it():
    (container,) = mlflow_objects()["Deployment"]["spec"]["template"]["spec"]["containers"]
    command = " ".join(container["command"] + container["args"])
    assert "mlflow server --app-name basic-auth" in command and '"Flask-WTF<2"' in command
    assert "MLFLOW_AUTH_CONFIG_PATH=" in command and "admin_password = %s" in command
    assert f"auth_cache_ttl_seconds = {AUTH_CACHE_TTL_S}\\n" in command  # as the rehearsal's server runs
    secrets = {var["name"]: var["valueFrom"]["secretKeyRef"] for var in container["env"] if "valueFrom" in var}
    assert secrets["MLFLOW_ADMIN_PASSWORD"] == {"name": "mlflow-auth", "key": "admin-password"}
    assert secrets["MLFLOW_FLASK_SERVER_SECRET_KEY"]["name"] == "mlflow-auth"
    for path in RAY_MANIFESTS:
        for ray_container in all_ray_containers(load_manifest(path)):
            env = {var["name"]: var for var in ray_container.get("env", [])}
            assert env["MLFLOW_TRACKING_USERNAME"]["value"] == "admin", (path.name, ray_container["name"])
            password = env["MLFLOW_TRACKING_PASSWORD"]["valueFrom"]["secretKeyRef"]
            assert password == {"name": "mlflow-auth", "key": "admin-password"}, (path.name, ray_container["name"])
