"""Each non-MAE architecture's pretraining recipe, from its own paper (paper profile, arch grid).

The RankMe study trains its Sec. IV-G architectures as their authors did: "Different model
architectures have different parameter settings; we refer readers to the respective architecture
papers" (Sec. IV-G; Sec. III-B: "followed the settings in their original papers"). So a
paper-profile trial of these families does not take the Dasheng recipe (sweeps.protocol.recipe)
but the one below: peak lr, optimizer, schedule, warmup, steps and batch, each with its source.
Where a paper is silent, the authors' released configuration decides (fairseq's yaml files for
wav2vec 2.0, HuBERT and the conformer; SSAST's run scripts), named beside the number. Masking is
each model's own and lives in its config (models/wave/*_config.py, models/ssast/config.py).

Translation to this pipeline: a batch stated in seconds of audio becomes that many seconds of the
study's 10 s crops (App. B); HuBERT's two iterations are one run here at the second iteration's
length (its codebook comes from `python -m pipeline.targets`). The CPU profile keeps its one
measured recipe for every family: these runs are hundreds of thousands of steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

STUDY_CROP_SECONDS = 10.0  # App. B: 10-second clips; the batch in seconds becomes crops of this length


@dataclass(frozen=True, kw_only=True)
class ArchitectureRecipe:
    peak_lr: float
    train_steps: int | None  # None: the paper states none; the study's 746,000 (Sec. III-B) is kept
    warmup_steps: int | None = None  # absolute, where the source gives steps
    warmup_fraction: float | None = None  # of train_steps, where the source gives a share
    lr_schedule: str  # after the warmup: linear (to 0) or constant
    adam_betas: tuple[float, float]
    adam_eps: float
    weight_decay: float
    grad_clip_norm: float  # 0: none
    batch_seconds: float | None = None  # audio per optimizer step, where the source states seconds
    batch_clips: int | None = None  # clips per optimizer step, where the source states clips
    masking: str  # what the model's own config does (for --plan)
    sources: dict[str, str] = field(default_factory=dict)  # field -> where it is stated

    def pretrain_fields(self, train_steps: int) -> dict:
        """PretrainConfig fields. fairseq's Adam decays every parameter (decoupled, as AdamW) and
        SSAST's torch Adam every parameter too: nothing is exempt; fp32 Adam, no 8-bit state."""
        return {
            "global_batch_size": self.global_batch_size, "peak_lr": self.peak_lr, "weight_decay": self.weight_decay,
            "warmup_steps": self.warmup_for(train_steps), "min_lr_ratio": 0.0, "lr_schedule": self.lr_schedule,
            "adam_betas": self.adam_betas, "adam_eps": self.adam_eps, "grad_clip_norm": self.grad_clip_norm,
            "decay_all_parameters": True, "optimizer": "adamw",
        }  # fmt: skip

    @property
    def global_batch_size(self) -> int:
        if self.batch_clips is not None:
            return self.batch_clips
        return max(1, round(self.batch_seconds / STUDY_CROP_SECONDS))

    def warmup_for(self, train_steps: int) -> int:
        if self.warmup_steps is not None:
            return self.warmup_steps
        return math.ceil((self.warmup_fraction or 0.0) * train_steps)


FAIRSEQ_W2V2 = "fairseq examples/wav2vec/config/pretraining/wav2vec2_base_librispeech.yaml"
FAIRSEQ_HUBERT = "fairseq examples/hubert/config/pretrain/hubert_base_librispeech.yaml"
FAIRSEQ_CONFORMER = "fairseq examples/wav2vec/config/pretraining/wav2vec2_conformer_large_librivox.yaml"
SSAST_SCRIPT = "ssast src/pretrain/run_mask_patch.sh and src/traintest_mask.py"

# wav2vec 2.0 (Baevski et al. 2020) Sec. 4.2: Adam, warm up over the first 8% of updates to a peak
# of 5e-4 (BASE) / 3e-4 (LARGE), then linear decay; BASE 400k updates, LARGE on LV-60k 600k; batch
# 1.6 h (BASE) / 2.7 h (LARGE); masking p = 0.065, M = 10. Betas (0.9, 0.98), eps 1e-6, weight decay
# 0.01 and no clipping are the fairseq configuration's (the paper says only "Adam").
_W2V2_OPTIMIZER = {"adam_betas": (0.9, 0.98), "adam_eps": 1e-6, "weight_decay": 0.01, "grad_clip_norm": 0.0}
_W2V2_SOURCES = {
    "peak_lr, train_steps, warmup, schedule, batch, masking": "wav2vec 2.0 Sec. 4.2",
    "betas, eps, weight decay, no clipping": f"{FAIRSEQ_W2V2} (optimizer: adam_betas, adam_eps, weight_decay)",
}
W2V2_MASKING = "spans of 10 frames starting at 6.5% of frames (wav2vec 2.0 Sec. 4.2)"
# HuBERT (Hsu et al. 2021) Sec. IV-C: Adam betas (0.9, 0.98), lr ramped over the first 8% of steps to
# 5e-4 (BASE) / 1.5e-3 (LARGE) / 3e-3 (X-LARGE), then linear decay; BASE 250k steps on MFCC targets,
# then 400k on layer-6 targets; batch 87.5 s x 32 GPUs (BASE), 56.25 s x 128 (LARGE), 22.5 s x 256
# (X-LARGE); masking p = 8%, l = 10. eps 1e-6, weight decay 0.01 and clipping at 10 are fairseq's.
_HUBERT_OPTIMIZER = {"adam_betas": (0.9, 0.98), "adam_eps": 1e-6, "weight_decay": 0.01, "grad_clip_norm": 10.0}
_HUBERT_SOURCES = {
    "peak_lr, train_steps, warmup, schedule, betas, batch, masking": "HuBERT Sec. IV-C",
    "eps, weight decay, clipping at 10": f"{FAIRSEQ_HUBERT} (adam_eps, weight_decay, clip_norm)",
}
HUBERT_MASKING = "spans of 10 frames starting at 8% of frames (HuBERT Sec. IV-C)"


def _wav2vec2(peak_lr: float, train_steps: int, batch_hours: float) -> ArchitectureRecipe:
    return ArchitectureRecipe(
        peak_lr=peak_lr, train_steps=train_steps, warmup_fraction=0.08, lr_schedule="linear",
        batch_seconds=batch_hours * 3600, masking=W2V2_MASKING, sources=_W2V2_SOURCES, **_W2V2_OPTIMIZER,
    )  # fmt: skip


def _hubert(peak_lr: float, seconds_per_gpu: float, gpus: int) -> ArchitectureRecipe:
    return ArchitectureRecipe(
        peak_lr=peak_lr, train_steps=400_000, warmup_fraction=0.08, lr_schedule="linear",
        batch_seconds=seconds_per_gpu * gpus, masking=HUBERT_MASKING, sources=_HUBERT_SOURCES, **_HUBERT_OPTIMIZER,
    )  # fmt: skip


ARCHITECTURE_RECIPES: dict[str, ArchitectureRecipe] = {
    "wav2vec2-base": _wav2vec2(5e-4, 400_000, 1.6),
    "wav2vec2-large": _wav2vec2(3e-4, 600_000, 2.7),
    "hubert-base": _hubert(5e-4, 87.5, 32),
    "hubert-large": _hubert(1.5e-3, 56.25, 128),
    "hubert-xlarge": _hubert(3e-3, 22.5, 256),
    # The conformer variant has no paper recipe (fairseq's README names none): fairseq's LARGE
    # configuration, which copies wav2vec2_large_librivox.yaml and adds conformer layers: lr 5e-3
    # (max_update 1,000,000, warmup_updates 32,000, polynomial_decay), 1.2M samples per GPU x 128 GPUs.
    **{
        name: ArchitectureRecipe(
            peak_lr=5e-3, train_steps=1_000_000, warmup_steps=32_000, lr_schedule="linear",
            batch_seconds=1_200_000 / 16_000 * 128, masking=W2V2_MASKING,
            sources={"every number": f"{FAIRSEQ_CONFORMER} (lr, max_update, warmup_updates, max_tokens, "
                     "distributed_world_size, adam_betas, adam_eps, weight_decay)"},
            **_W2V2_OPTIMIZER,
        )
        for name in ("wav2vec2-conformer-large-relpos", "wav2vec2-conformer-large-rope")
    },
}  # fmt: skip

# SSAST (Gong et al., AAAI 2022): "batch size of 24, an initial learning rate of 1e-4", the lr halved
# when the validation pretext score has not improved for 8k iterations (Sec. 3); Adam betas (0.95,
# 0.999), weight decay 5e-7, a 1,000-step warmup and no clipping are its code's
# (src/traintest_mask.py); the paper states no step count. The plateau halving follows a pretext
# score this pipeline does not compute: the lr stays constant after the warmup (docs/fidelity.md).
SSAST_RECIPE = ArchitectureRecipe(
    peak_lr=1e-4, train_steps=None, warmup_steps=1_000, lr_schedule="constant", adam_betas=(0.95, 0.999),
    adam_eps=1e-8, weight_decay=5e-7, grad_clip_norm=0.0, batch_clips=24,
    masking="the grid point's masked patches (Table IV: 250 or 400), in clusters of side 3-5 for patch models",
    sources={"peak_lr, batch, plateau halving": "SSAST Sec. 3 (experiment setup)",
             "betas, weight decay, warmup, no clipping": SSAST_SCRIPT},
)  # fmt: skip


def architecture_recipe(model_name: str) -> ArchitectureRecipe | None:
    """The recipe a paper-profile trial of `model_name` takes; None: the study's own (Dasheng's)."""
    if model_name.startswith("ssast-") and "-debug" not in model_name:
        return SSAST_RECIPE
    return ARCHITECTURE_RECIPES.get(model_name)
