"""`--plan --gpu --mfu --gpus`: one trial's cost worked out by hand, the packing, and bad flags."""

from __future__ import annotations

import pytest

from pipeline.cli.errors import run_cli
from sweeps.scaling import main
from sweeps.study.cost import (
    CostAssumptions,
    TrialCost,
    packed_wall_hours,
    shard_bytes_per_hour,
)
from sweeps.study.grids import expand_grids
from sweeps.study.plan import plan_text, plan_trial


def vit_block_parameters(width: int) -> int:
    """Pre-LN ViT block: qkv (3 w^2 + 3 w), proj (w^2 + w), MLP w -> 4w -> w (8 w^2 + 5 w), 2 LayerNorms (4 w)."""
    return 12 * width**2 + 13 * width


def test_mae_en768_12_row_on_the_mask_grid_matches_the_formula_by_hand():
    spec = next(s for s in expand_grids("mask_ratio", profile="paper") if s.mask_ratio == 0.75)
    trial = plan_trial(spec, "paper", assumptions=CostAssumptions(gpu="h100", mfu=0.4, gpus=8))
    # mae-en768-12 (models/mae/study_mae.py): 250 patches of 4 frames x 64 mels, 62 kept at mask 0.75 (pairs of
    # patches: 31 of 125 pairs); encoder 768 x 12, decoder 512 x 8, head 512 -> 256 values a patch.
    patch_embed = 256 * 768 + 768
    encoder = 12 * vit_block_parameters(768) + 2 * 768  # + final LayerNorm
    decoder_embed = 768 * 512 + 512
    decoder = 8 * vit_block_parameters(512) + 2 * 512 + (512 * 256 + 256)  # blocks, norm, head
    # Kaplan's 6 N per token: the encoder side sees the 62 kept patches, the decoder all 250.
    flops_per_sample = 6 * ((patch_embed + encoder + decoder_embed) * 62 + decoder * 250)
    flops = flops_per_sample * 256 * 746_000  # App. B: batch 256, 746,000 steps
    assert trial.training_flops == pytest.approx(flops, rel=1e-12)
    assert flops == pytest.approx(1.3347e19, rel=1e-4)
    # At 40% of the H100 SXM's 989 dense bf16 TFLOP/s: 9.37 GPU-hours.
    gpu_hours = flops / (989e12 * 0.4) / 3600
    assert trial.cost.gpu_hours == pytest.approx(gpu_hours, rel=1e-12)
    assert gpu_hours == pytest.approx(9.37, abs=0.01)
    # Parameters: + the time (Dasheng's 252 rows x 768) and frequency (768) position tables, the
    # decoder's 253 x 512 table, the mask token (512) and the input BatchNorm (2 x 64): Table I's 111.32M.
    parameters = patch_embed + encoder + decoder_embed + decoder + (252 * 768 + 768) + 253 * 512 + 512 + 128
    assert parameters == trial.total_parameters == 111_323_008
    # 8-bit AdamW (App. B, the recipe's "adamw8bit"): fp32 weights + two 1-byte moments.
    assert trial.config.optim.optimizer == "adamw8bit"
    assert trial.cost.checkpoint_bytes == parameters * 6 == 667_938_048
    # Checkpoints at 25/50/75/100% of 746,000 steps; the paper profile evaluates only the last
    # (--eval-checkpoints final), so Ray keeps PretrainConfig's latest 2.
    assert trial.cost.checkpoints_kept == 2
    # 5,333 h (Sec. IV-B) at the measured 122,908,009 bytes / 3.0809 h of dasheng shards.
    assert trial.cost.shard_bytes == pytest.approx(5_333 * 122_908_009 / 3.080939149305556, rel=1e-12)
    text = plan_text("mask_ratio", "paper", assumptions=CostAssumptions(gpu="h100", mfu=0.4, gpus=8))
    assert "GPU-hours: 9.4 (1 GPU, 9.4 h of wall time)" in text
    assert "checkpoints: 2 kept x 667.94 MB (111,323,008 params x 6 B, adamw8bit) = 1.34 GB" in text
    # 14 mask ratios on one shard set of 5,333 h: 212.8 GB once, not 14 times.
    assert "shards: 212.75 GB (1 shard set(s)" in text


def test_evaluating_every_checkpoint_keeps_them_all():
    spec = expand_grids("size", profile="paper")[0]
    trial = plan_trial(spec, "paper", eval_checkpoints="all")
    # 0 (initialisation), Table III's 50k/100k/200k/300k, the 186,500-step quarters and 746,000.
    assert trial.cost.checkpoints_kept == 9


def test_a100_at_half_the_mfu_costs_the_h100_ratio_more():
    spec = expand_grids("mask_ratio", profile="paper")[0]
    h100 = plan_trial(spec, "paper", assumptions=CostAssumptions(gpu="h100", mfu=0.4)).cost.gpu_hours
    a100 = plan_trial(spec, "paper", assumptions=CostAssumptions(gpu="a100", mfu=0.2)).cost.gpu_hours
    assert a100 / h100 == pytest.approx(989 / 312 * 2)


def _trial(gpu_hours: float) -> TrialCost:
    return TrialCost(
        parameters=1,
        training_flops=0.0,
        gpu_hours=gpu_hours,
        gpus_per_trial=1,
        checkpoint_bytes=0,
        checkpoints_kept=1,
        shard_set=("dasheng", 1.0),
        shard_bytes=0.0,
    )


def test_trials_are_packed_longest_first_onto_the_least_loaded_gpu():
    trials = [_trial(h) for h in (3, 5, 3, 4, 3)]
    # Greedy: 5 | 4, then 3s onto the lighter GPU: 5+3 | 4+3, then 8 | 7+3 = 10 (the best split is 9).
    assert packed_wall_hours(trials, 2) == 10
    assert packed_wall_hours(trials, 1) == 18  # one GPU: everything in a row
    assert packed_wall_hours(trials, 64) == 5  # more GPUs than trials: the longest trial


def test_shard_bytes_per_hour_is_the_measured_figure_scaled_by_mels():
    assert shard_bytes_per_hour("dasheng") == pytest.approx(39.89e6, rel=1e-3)
    assert shard_bytes_per_hour("audiomae") == pytest.approx(39.89e6 * 80 / 64, rel=1e-3)  # 80 mels, 10 ms hop


PLAN = ["--grid", "mask_ratio", "--profile", "paper", "--plan"]


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--mfu", "0"], "--mfu must be a fraction of the GPU's peak in (0, 1]"),
        (["--mfu", "1.5"], "--mfu must be a fraction of the GPU's peak in (0, 1]"),
        (["--gpu", "v100"], "--gpu 'v100' is not a GPU the plan knows; use one of h100, a100"),
        (["--gpus", "0"], "--gpus must be at least 1"),
    ],
)
def test_bad_cost_flags_are_one_line_and_exit_2(capsys, flags, named):
    assert run_cli(main, "sweeps.scaling", PLAN + flags) == 2
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1


def test_cost_flags_without_plan_are_refused_before_anything_runs(capsys):
    assert main(["--grid", "mask_ratio", "--gpu", "h100"]) == 2
    assert "add --plan" in capsys.readouterr().err
