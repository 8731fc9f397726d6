"""The pretraining command line and configuration checks (no Ray started)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing

import pytest

from pipeline.cli.flags import FILLED_BY_PROGRAM_KEY, FLAG_KEY, section_class
from pipeline.pretrain.__main__ import build_parser, config_from_args, parse_override
from pipeline.pretrain.config import RESOLVED_FIELDS, PretrainConfig, ResolvedPretrainConfig


def test_help_lists_every_issue_option_with_defaults():
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.pretrain", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for option in (
        "--model",
        "--shards",
        "--steps",
        "--batch-size",
        "--num-workers",
        "--use-gpu",
        "--lr",
        "--mask-ratio",
        "--run-name",
        "--storage-path",
        "--tracking-uri",
        "--experiment",
        "--address",
    ):
        assert option in out, option
    assert "(default: audiomae++-debug)" in out and "(default: 300)" in out


def test_arguments_map_onto_the_config():
    args = build_parser().parse_args(
        [
            "--model",
            "mae-debug",
            "--steps",
            "50",
            "--batch-size",
            "64",
            "--num-workers",
            "2",
            "--micro-batch-size",
            "8",
            "--lr",
            "3e-4",
            "--mask-ratio",
            "0.6",
            "--override",
            "decoder=cross",
            "--override",
            "prediction_ratio=0.3",
            "--spread",
            "--run-name",
            "r",
            "--experiment",
            "e",
        ]
    )
    config = config_from_args(args)
    assert (
        config.model.model_name == "mae-debug"
        and config.training.steps == 50
        and config.training.global_batch_size == 64
    )
    assert config.model_build_overrides() == {"decoder": "cross", "prediction_ratio": 0.3, "mask_ratio": 0.6}
    assert config.accumulation_steps == 4  # 64 = 8 crops x 2 workers x 4
    assert config.compute.placement_strategy == "SPREAD" and config.optim.base_lr == 3e-4
    assert (config.tracking.run_name, config.tracking.experiment_name) == ("r", "e")


def test_override_values_parse_as_json_else_text():
    assert parse_override("depth=4") == ("depth", 4)
    assert parse_override("decoder=cross") == ("decoder", "cross")
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        parse_override("depth")


def test_batch_that_does_not_split_is_a_clear_error():
    with pytest.raises(ValueError, match="global_batch_size 30 is not a multiple"):
        PretrainConfig.from_flat(global_batch_size=30, num_workers=4)


def test_zero_workers_is_refused():
    with pytest.raises(ValueError, match="--num-workers must be at least 1"):
        PretrainConfig.from_flat(num_workers=0)


def test_negative_system_metrics_interval_is_refused():
    with pytest.raises(ValueError, match="--system-metrics-every must be at least 0, got -1"):
        PretrainConfig.from_flat(system_metrics_every_s=-1)


def test_resolved_config_fills_machine_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIOSCALE_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = PretrainConfig.from_flat(model_name="mae-debug", steps=200, global_batch_size=32, num_workers=2).resolved(
        cluster_cpus=9
    )
    # mae-debug uses the dasheng front end; default shards live per preset (pipeline.defaults).
    assert config.data.shards_dir == str(tmp_path / "shards" / "dasheng")
    assert config.checkpoint.storage_path == str(tmp_path / "ray_results")
    assert config.tracking.tracking_uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert config.tracking.run_name.startswith("mae-debug-")
    assert config.schedule.warmup_steps == 20 and config.training.micro_batch_size == 16
    assert config.compute.cpus_per_worker == 4.0  # (9 - 1) CPUs shared by 2 workers
    assert ResolvedPretrainConfig.from_flat(**config.to_dict()) == config  # what a Ray worker rebuilds


SECTIONS = [section_class(PretrainConfig, part.name) for part in dataclasses.fields(PretrainConfig)]


def _cli_fields():
    fields = [field for section in SECTIONS for field in dataclasses.fields(section)]
    return [f for f in fields if FLAG_KEY in f.metadata], [f.name for f in fields if FLAG_KEY not in f.metadata]


def test_every_config_field_has_a_flag_with_help_unless_the_program_fills_it():
    flagged, unflagged = _cli_fields()
    assert sorted(unflagged) == ["mlflow_run_id", "parent_run_id", "shard_fingerprint"]
    every_field = [field for section in SECTIONS for field in dataclasses.fields(section)]
    assert all(f.metadata[FILLED_BY_PROGRAM_KEY] for f in every_field if f.name in unflagged)
    options = {action.option_strings[0]: action for action in build_parser()._actions}
    for field in flagged:
        action = options[field.metadata[FLAG_KEY].name]
        assert action.help and len(action.help) > 10, field.name


# A value different from the default for every kind of field; the switches and --override are special.
SAMPLE_TEXT = {int: "4", float: "0.25", str: "x"}  # 4 divides the default batch of 32


def test_parsing_each_flag_sets_its_field():
    hints = {name: hint for section in SECTIONS for name, hint in typing.get_type_hints(section).items()}
    special = {
        "placement_strategy": ([], "SPREAD"), "model_overrides": (["decoder=cross"], {"decoder": "cross"}),
        "optimizer": (["adamw8bit"], "adamw8bit"), "rankme_steps": (["300000,50000"], (50_000, 300_000)), "checkpoint_steps": (["0,21,300"], (0, 21, 300)),
        "allow_changed": (["lr, warmup-steps"], ("lr", "warmup-steps")), "precision": (["bf16"], "bf16"),
        "checkpoint_upload": (["sync"], "sync"), "adam_betas": (["0.9,0.999"], (0.9, 0.999)),
        "lr_schedule": (["linear"], "linear"),
    }  # fmt: skip
    for field in _cli_fields()[0]:
        name = field.metadata[FLAG_KEY].name
        if field.name in special:
            extra, expected = special[field.name]
        elif hints[field.name] is bool:
            extra, expected = [], True
        else:
            allowed = (hints[field.name], *typing.get_args(hints[field.name]))  # `int | None` allows int
            value_type = next(t for t in (int, float, str) if t in allowed)
            extra, expected = [SAMPLE_TEXT[value_type]], value_type(SAMPLE_TEXT[value_type])
        config = config_from_args(build_parser().parse_args([name, *extra]))
        assert config.to_dict()[field.name] == expected != PretrainConfig().to_dict()[field.name], name


def test_each_setting_lives_in_one_section_and_the_flat_view_round_trips():
    flat = PretrainConfig().to_dict()
    sections = [field.name for field in dataclasses.fields(PretrainConfig)]
    assert len(flat) == sum(len(dataclasses.fields(section)) for section in SECTIONS) == 55
    assert not set(sections) & set(flat)  # a flat read left over (config.steps) fails instead of reading a section
    with pytest.raises(AttributeError):
        PretrainConfig().steps  # noqa: B018
    changed = PretrainConfig.from_flat(**flat).replace(steps=600, base_lr=1e-3, validation_patience=2)
    assert (changed.training.steps, changed.optim.base_lr, changed.validation.validation_patience) == (600, 1e-3, 2)
    assert changed.to_dict() == flat | {"steps": 600, "base_lr": 1e-3, "validation_patience": 2}
    with pytest.raises(TypeError, match="PretrainConfig has no setting 'lr'"):
        PretrainConfig.from_flat(lr=1e-3)  # the flag's name is not the field's
    with pytest.raises(ValueError, match="--checkpoint-steps must lie in 0..--steps"):
        changed.replace(checkpoint_steps=(700,))  # a check across two sections runs again


def test_crop_and_mask_ratio_given_as_overrides_land_in_their_fields():
    argv = ["--override", "crop_frames=100", "--override", "mask_ratio=0.6"]
    config = config_from_args(build_parser().parse_args(argv))
    assert (config.model.crop_frames, config.model.mask_ratio, config.model.model_overrides) == (100, 0.6, {})
    with pytest.raises(ValueError, match="--mask-ratio 0.5 and --override mask_ratio=0.6 disagree"):
        PretrainConfig.from_flat(mask_ratio=0.5, model_overrides={"mask_ratio": 0.6})


@pytest.mark.parametrize("flag, value", [("--mask-ratio", "1.0"), ("--mask-ratio", "0"), ("--crop-frames", "0")])
def test_out_of_range_crop_or_mask_ratio_names_the_flag(flag, value):
    with pytest.raises(ValueError, match=f"^{flag} must be"):
        config_from_args(build_parser().parse_args([flag, value]))


def test_resolved_config_carries_the_model_crop_and_mask_ratio(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIOSCALE_HOME", str(tmp_path))
    config = PretrainConfig.from_flat(model_name="mae-debug").resolved()
    assert (config.model.crop_frames, config.model.mask_ratio) == (200, 0.75)  # mae-debug's own
    assert (
        PretrainConfig.from_flat(model_name="mae-debug", crop_frames=104).resolved().describe_model().spec.crop_frames
        == 104
    )


def test_a_resolved_run_is_its_own_type_and_a_worker_refuses_one_left_unresolved(tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIOSCALE_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    config = PretrainConfig.from_flat(model_name="mae-debug", storage_path="runs").resolved(shard_fingerprint="f" * 64)
    assert isinstance(config, ResolvedPretrainConfig) and config.data.shard_fingerprint == "f" * 64
    assert config.checkpoint.storage_path == str(tmp_path / "runs") and config.tracking.tracking_uri.startswith(
        "sqlite:////"
    )
    assert (config.schedule.warmup_steps, config.training.micro_batch_size) == (
        30,
        32,
    )  # 10% of 300 steps; batch / 1 worker
    assert ResolvedPretrainConfig.from_flat(**config.to_dict()) == config  # what each worker rebuilds from Ray's dict
    assert isinstance(config.replace(mlflow_run_id="abc"), ResolvedPretrainConfig)
    for name in RESOLVED_FIELDS:
        with pytest.raises(ValueError, match=f"a resolved run needs {name}; build it with PretrainConfig.resolved"):
            ResolvedPretrainConfig.from_flat(**{**config.to_dict(), name: None})
    with pytest.raises(ValueError, match="storage_path 'runs' is relative"):
        ResolvedPretrainConfig.from_flat(**{**config.to_dict(), "storage_path": "runs"})


@pytest.mark.parametrize("text", ["0.9", "0.9,1.0", "a,b"])
def test_bad_adam_betas_are_one_clear_line(text):
    with pytest.raises(SystemExit, match="expected two comma-separated decay rates in \\[0, 1\\)"):
        build_parser().parse_args(["--adam-betas", text])
