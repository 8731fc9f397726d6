"""Each non-MAE architecture of the paper profile trains with its own paper's recipe (RankMe study Sec. IV-G)."""

from __future__ import annotations

import pytest

from sweeps.protocol.arch_recipes import ARCHITECTURE_RECIPES, SSAST_RECIPE, architecture_recipe
from sweeps.protocol.recipe import DASHENG_OPTIMIZER, trial_overrides
from sweeps.study.grids import expand_grids
from sweeps.study.plan import plan_text

# model: (peak lr, steps, warmup, schedule, betas, eps, weight decay, clip, crops of 10 s per step)
PAPER_VALUES = {
    # wav2vec 2.0 Sec. 4.2: 5e-4 / 3e-4, 400k / 600k (LV-60k), 8% warmup, linear decay, 1.6 h / 2.7 h;
    # betas, eps, decay and no clipping from fairseq's wav2vec2_base_librispeech.yaml.
    "wav2vec2-base": (5e-4, 400_000, 32_000, "linear", (0.9, 0.98), 1e-6, 0.01, 0.0, 576),
    "wav2vec2-large": (3e-4, 600_000, 48_000, "linear", (0.9, 0.98), 1e-6, 0.01, 0.0, 972),
    # HuBERT Sec. IV-C: 5e-4 / 1.5e-3 / 3e-3, 400k steps, 8% warmup, linear decay, betas (0.9, 0.98),
    # 87.5 s x 32 / 56.25 s x 128 / 22.5 s x 256 GPUs; clip 10 from fairseq's hubert_base_librispeech.yaml.
    "hubert-base": (5e-4, 400_000, 32_000, "linear", (0.9, 0.98), 1e-6, 0.01, 10.0, 280),
    "hubert-large": (1.5e-3, 400_000, 32_000, "linear", (0.9, 0.98), 1e-6, 0.01, 10.0, 720),
    "hubert-xlarge": (3e-3, 400_000, 32_000, "linear", (0.9, 0.98), 1e-6, 0.01, 10.0, 576),
    # fairseq's wav2vec2_conformer_large_librivox.yaml: lr 0.005, 1M updates, 32k warmup, 1.2M samples x 128.
    "wav2vec2-conformer-large-relpos": (5e-3, 1_000_000, 32_000, "linear", (0.9, 0.98), 1e-6, 0.01, 0.0, 960),
    "wav2vec2-conformer-large-rope": (5e-3, 1_000_000, 32_000, "linear", (0.9, 0.98), 1e-6, 0.01, 0.0, 960),
}


@pytest.mark.parametrize("model_name", sorted(PAPER_VALUES))
def test_each_recipe_holds_its_papers_numbers(model_name):
    lr, steps, warmup, schedule, betas, eps, decay, clip, batch = PAPER_VALUES[model_name]
    recipe = ARCHITECTURE_RECIPES[model_name]
    assert (recipe.peak_lr, recipe.train_steps, recipe.warmup_for(steps), recipe.lr_schedule) == (
        lr,
        steps,
        warmup,
        schedule,
    )
    assert (recipe.adam_betas, recipe.adam_eps, recipe.weight_decay, recipe.grad_clip_norm) == (betas, eps, decay, clip)
    assert recipe.global_batch_size == batch and recipe.sources


def test_ssast_recipe_and_which_models_take_one():
    # SSAST Sec. 3: batch 24, lr 1e-4; its code: Adam (0.95, 0.999), weight decay 5e-7, 1,000 warmup steps.
    assert (SSAST_RECIPE.peak_lr, SSAST_RECIPE.global_batch_size, SSAST_RECIPE.warmup_for(746_000)) == (1e-4, 24, 1_000)
    assert (SSAST_RECIPE.adam_betas, SSAST_RECIPE.weight_decay, SSAST_RECIPE.train_steps) == ((0.95, 0.999), 5e-7, None)
    assert architecture_recipe("ssast-base-patch") is SSAST_RECIPE
    assert architecture_recipe("ssast-debug-patch") is None  # the CPU profile's debug sizes keep its recipe
    assert architecture_recipe("mae-en768-12") is None and architecture_recipe("audiomae++-base") is None


def test_paper_trials_take_their_architectures_recipe_and_the_study_mae_dashengs_optimizer():
    hubert = trial_overrides("paper", train_steps=400_000, hours=None, context_batch=32, model_name="hubert-base")
    assert (hubert["peak_lr"], hubert["global_batch_size"], hubert["warmup_steps"]) == (5e-4, 280, 32_000)
    assert (hubert["lr_schedule"], hubert["min_lr_ratio"], hubert["optimizer"]) == ("linear", 0.0, "adamw")
    assert (hubert["adam_betas"], hubert["grad_clip_norm"], hubert["decay_all_parameters"]) == ((0.9, 0.98), 10.0, True)
    mae = trial_overrides("paper", train_steps=746_000, hours=10_666.0, context_batch=32, model_name="mae-en768-12")
    assert {key: mae[key] for key in DASHENG_OPTIMIZER} == DASHENG_OPTIMIZER
    assert DASHENG_OPTIMIZER == {"adam_betas": (0.9, 0.999), "decay_all_parameters": True, "grad_clip_norm": 0.0}
    assert (mae["peak_lr"], mae["global_batch_size"], mae["optimizer"]) == (3e-4, 256, "adamw8bit")
    # The CPU profile keeps the pipeline's MAE optimizer for every family (its measured recipe).
    cpu = trial_overrides("cpu_default", train_steps=300, hours=None, context_batch=32, model_name="hubert-debug")
    assert not {"adam_betas", "decay_all_parameters", "grad_clip_norm", "lr_schedule"} & set(cpu)


def test_the_arch_grid_trains_each_architecture_its_own_length_and_plan_prints_the_recipe():
    steps = {trial.model_name: trial.train_steps for trial in expand_grids("arch", profile="paper")}
    assert (steps["wav2vec2-base"], steps["hubert-base"], steps["mae-en768-12"]) == (400_000, 400_000, 746_000)
    assert steps["ssast-base-patch"] == 746_000  # SSAST states no step count: the study's
    text = plan_text("arch", "paper")
    hubert = text[text.index("- hubert-base") :].split("\n- ")[0]
    assert "schedule: lr peak 0.0005 as given, warmup 32,000 steps, then linear to 0% of peak" in hubert
    assert (
        "optimizer: adamw, betas (0.9, 0.98), eps 1e-06, weight decay 0.01 (every parameter decayed), clipped at 10"
        in hubert
    )
    assert (
        "recipe: its own paper's: peak_lr, train_steps, warmup, schedule, betas, batch, masking: HuBERT Sec. IV-C"
        in hubert
    )
    assert "batch: 280" in hubert and "steps: 400,000" in hubert
