"""Resume settings are compared with the newest checkpoint's saved config (fast: no Ray, no training).
The end-to-end runs are in test_pretrain_resume.py (marked slow)."""

from __future__ import annotations

import json

import pytest

from pipeline.cli.errors import UserError
from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.resume_check import check_resume


def _config(tmp_path, **changes) -> PretrainConfig:
    settings = {"run_name": "tiny", "storage_path": str(tmp_path), "base_lr": 1e-3, "warmup_steps": 3, "steps": 20}
    return PretrainConfig.from_flat(**{**settings, **changes})


def _save_checkpoint(tmp_path, config: PretrainConfig, step: int = 10) -> None:
    folder = tmp_path / "tiny" / "run" / f"checkpoint_step_{step:08d}"
    folder.mkdir(parents=True)
    (folder / "model.json").write_text(json.dumps({"step": step, "pretrain_config": config.to_dict()}, default=str))


def test_a_changed_lr_is_refused_naming_the_flag_and_both_values(tmp_path):
    _save_checkpoint(tmp_path, _config(tmp_path))
    with pytest.raises(UserError, match=r"--lr 0\.001 -> 0\.002.*--allow-changed lr"):
        check_resume(_config(tmp_path, base_lr=2e-3), warmup_given=True)


def test_an_allowed_change_passes_and_is_reported(tmp_path):
    _save_checkpoint(tmp_path, _config(tmp_path))
    _, changes = check_resume(_config(tmp_path, base_lr=2e-3, allow_changed=("lr",)), warmup_given=True)
    assert changes == {"--lr": "0.001 -> 0.002"}


def test_more_steps_and_an_unset_warmup_keep_the_run(tmp_path):
    _save_checkpoint(tmp_path, _config(tmp_path))
    config, changes = check_resume(_config(tmp_path, steps=40, warmup_steps=None), warmup_given=False)
    assert changes == {} and config.schedule.warmup_steps == 3  # the checkpoint's warmup, not 10% of 40


def test_a_fresh_run_has_nothing_to_compare(tmp_path):
    config, changes = check_resume(_config(tmp_path, base_lr=5e-3), warmup_given=True)
    assert changes == {} and config.optim.base_lr == 5e-3
