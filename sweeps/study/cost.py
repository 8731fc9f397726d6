"""What a planned study costs before it runs: GPU-hours, wall time, checkpoint and shard storage.

The arithmetic `--plan --gpu h100|a100 --mfu 0.4 --gpus N` prints (`sweeps.study.plan`):
- GPU-hours = training FLOPs / (the GPU's dense bf16 peak x MFU) / 3600. Training FLOPs are the
  models' own `training_flops_per_sample` x global batch x steps: the full horizon (a trial the
  validation early stop ends sooner costs less), pretraining only (RankMe, validation and the
  probes are left out).
- Wall time: each trial runs on the GPUs its pretraining asks for (`PretrainConfig.num_workers`
  Ray Train workers of one GPU each; the study leaves it at 1), trials run side by side on N GPUs,
  packed greedily longest first onto the least loaded GPU group (LPT scheduling); the wall time
  is the busiest group's load. Trials that do not fill N GPUs leave the rest idle.
- Checkpoints: parameters x bytes per parameter (fp32 weights and the optimizer's two moments),
  times the checkpoints a trial keeps (Ray Train's `num_to_keep`, as `pipeline.pretrain.driver`).
  The paper recipe asks for 8-bit AdamW (6 B/param); requirements.txt does not install bitsandbytes,
  and without it (or a GPU) plain AdamW runs (`pipeline.pretrain.optim.optimizer_choice`): 12 B/param,
  which the total states as well.
- Shards: hours x the measured bytes per hour of log-mel shards; a study stores one shard set per
  distinct (front-end preset, hours), as `sweeps.study.trainable.prepare_study_shards` builds them.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline.audio.frontend import get_preset
from pipeline.pretrain.config import PretrainConfig
from sweeps.study.grids import PAPER_HOURS_RANGE

# Dense (no sparsity) bf16 Tensor Core peaks, TFLOP/s. NVIDIA's datasheets print the sparse figure
# with a footnote; dense is half of it.
GPU_PEAK_BF16_TFLOPS = {
    "h100": 989.0,  # NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: BF16 1,979 TFLOPS with sparsity
    "a100": 312.0,  # NVIDIA A100 Tensor Core GPU datasheet (SXM and PCIe): BF16 312 TFLOPS, 624 sparse
}
DEFAULT_GPU = "h100"
DEFAULT_MFU = 0.4  # a round, commonly reached figure for dense transformer training; state your own
DEFAULT_GPUS = 8  # one 8-GPU node: p5.48xlarge / a3-highgpu-8g (cluster/ray-up)

# Bytes a checkpoint holds per parameter: the fp32 weights (model.safetensors) and the optimizer's
# two moments (train_state.pt). bitsandbytes' AdamW8bit keeps each moment in one byte; its fp32 scale
# per block of values, and the fp32 moments of tensors under min_8bit_size = 4,096 values (bitsandbytes'
# default: biases, norms), are under 1% here and left out.
CHECKPOINT_BYTES_PER_PARAMETER = {
    "adamw": 4 + 4 + 4,  # fp32 weights + fp32 exp_avg + fp32 exp_avg_sq
    "adamw8bit": 4 + 1 + 1,  # fp32 weights + 8-bit exp_avg + 8-bit exp_avg_sq (App. B's optimizer)
}

# Shard bytes per hour, measured on the default corpus's shards (pipeline.corpus, prep of 2026-11-23,
# preset dasheng, fingerprint eaa11d53ba5f; /tmp/fresh6_home/shards/dasheng/manifest.json): its 33
# part files hold 122,908,009 bytes for total_hours 3.0809 (1,111,124 frames x 64 mels): 39.9 MB an
# hour, 1.73 bytes a mel value (float16 is 2: Parquet's compression wins back more than the ids and
# offsets cost). Other presets scale by their mels and frame rate.
MEASURED_SHARD_BYTES = 122_908_009
MEASURED_SHARD_HOURS = 3.080939149305556
MEASURED_SHARD_PRESET = "dasheng"
# Hours a trial without an hour budget (`max_hours` None: the whole shard set) is priced at.
WHOLE_SET_HOURS = {
    "paper": PAPER_HOURS_RANGE[1],  # Sec. III-A: the study's largest volume, 277,000 h
    "cpu_default": MEASURED_SHARD_HOURS,  # the default corpus, as measured above
}


@dataclass(frozen=True, kw_only=True)
class CostAssumptions:
    """The hardware a plan is priced on; checked here, so a bad flag is one clear line."""

    gpu: str = DEFAULT_GPU
    mfu: float = DEFAULT_MFU
    gpus: int = DEFAULT_GPUS

    def __post_init__(self) -> None:
        if self.gpu not in GPU_PEAK_BF16_TFLOPS:
            known = ", ".join(GPU_PEAK_BF16_TFLOPS)
            raise ValueError(f"--gpu {self.gpu!r} is not a GPU the plan knows; use one of {known}")
        if not 0.0 < self.mfu <= 1.0:
            raise ValueError(f"--mfu must be a fraction of the GPU's peak in (0, 1], e.g. 0.4; got {self.mfu:g}")
        if self.gpus < 1:
            raise ValueError(f"--gpus must be at least 1 GPU to run the trials on; got {self.gpus}")

    @property
    def peak_flops_per_s(self) -> float:
        return GPU_PEAK_BF16_TFLOPS[self.gpu] * 1e12


@dataclass(frozen=True, kw_only=True)
class TrialCost:
    parameters: int
    training_flops: float
    gpu_hours: float
    gpus_per_trial: int
    checkpoint_bytes: int  # one checkpoint
    checkpoints_kept: int
    shard_set: tuple[str, float]  # (front-end preset, hours): the shard directory the trial reads
    shard_bytes: float

    @property
    def wall_hours(self) -> float:
        return self.gpu_hours / self.gpus_per_trial

    @property
    def kept_checkpoint_bytes(self) -> int:
        return self.checkpoint_bytes * self.checkpoints_kept


@dataclass(frozen=True, kw_only=True)
class StudyCost:
    training_flops: float
    gpu_hours: float
    wall_hours: float  # the trials packed on the plan's GPUs
    checkpoint_bytes: int  # every trial's kept checkpoints
    plain_adamw_checkpoint_bytes: int  # the same where plain AdamW runs (no bitsandbytes or GPU)
    gpus_per_trial: int
    shard_bytes: float  # every distinct shard set once
    shard_sets: int


def gpu_hours_for(training_flops: float, assumptions: CostAssumptions) -> float:
    return training_flops / (assumptions.peak_flops_per_s * assumptions.mfu) / 3600.0


def checkpoint_bytes_for(parameters: int, optimizer: str) -> int:
    if optimizer not in CHECKPOINT_BYTES_PER_PARAMETER:
        known = sorted(CHECKPOINT_BYTES_PER_PARAMETER)
        raise ValueError(f"no checkpoint size for optimizer {optimizer!r}; known: {known}")
    return parameters * CHECKPOINT_BYTES_PER_PARAMETER[optimizer]


def checkpoint_steps_written(config: PretrainConfig) -> list[int]:
    """Steps a run writes a checkpoint at (pipeline.pretrain.loop): every `checkpoint_every_steps`,
    each of `checkpoint_steps` (0 is the initialisation) and the last step."""
    every = range(
        config.checkpoint.checkpoint_every_steps, config.training.steps + 1, config.checkpoint.checkpoint_every_steps
    )
    return sorted({*every, *config.checkpoint.checkpoint_steps, config.training.steps})


def checkpoints_kept_for(config: PretrainConfig) -> int:
    """With `checkpoint_steps` (a study's evaluation points) Ray keeps them all; else the latest few."""
    written = len(checkpoint_steps_written(config))
    return written if config.checkpoint.checkpoint_steps else min(written, config.checkpoint.num_checkpoints_to_keep)


def shard_bytes_per_hour(preset_name: str) -> float:
    """The measured bytes per hour, scaled by the preset's mels and frames per second against dasheng's."""
    preset, measured = get_preset(preset_name), get_preset(MEASURED_SHARD_PRESET)
    values_per_second = preset.n_mels * 1000.0 / preset.hop_ms
    measured_values_per_second = measured.n_mels * 1000.0 / measured.hop_ms
    return MEASURED_SHARD_BYTES / MEASURED_SHARD_HOURS * values_per_second / measured_values_per_second


def trial_hours(max_hours: float | None, profile: str) -> float:
    return WHOLE_SET_HOURS[profile] if max_hours is None else max_hours


def cost_trial(
    config: PretrainConfig,
    *,
    training_flops: float,
    parameters: int,
    frontend_preset: str,
    hours: float,
    assumptions: CostAssumptions,
) -> TrialCost:
    return TrialCost(
        parameters=parameters,
        training_flops=training_flops,
        gpu_hours=gpu_hours_for(training_flops, assumptions),
        gpus_per_trial=config.compute.num_workers,
        checkpoint_bytes=checkpoint_bytes_for(parameters, config.optim.optimizer),
        checkpoints_kept=checkpoints_kept_for(config),
        shard_set=(frontend_preset, hours),
        shard_bytes=hours * shard_bytes_per_hour(frontend_preset),
    )


def gpus_per_trial_of(trials: Sequence[TrialCost]) -> int:
    return max((trial.gpus_per_trial for trial in trials), default=1)


def packed_wall_hours(trials: Sequence[TrialCost], gpus: int) -> float:
    """Greedy longest-first packing of the trials onto `gpus` GPUs; the busiest group's hours.

    Each trial takes `gpus_per_trial` GPUs for its whole run, so N GPUs hold N // gpus_per_trial
    trials at a time (every study trial asks the same number)."""
    per_trial = gpus_per_trial_of(trials)
    if per_trial > gpus:
        raise ValueError(f"--gpus {gpus} is fewer than the {per_trial} GPUs one trial runs on")
    loads = [0.0] * (gpus // per_trial)
    for hours in sorted((trial.wall_hours for trial in trials), reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + hours)  # the least loaded group takes it
    return max(loads)


def cost_study(trials: Iterable[TrialCost], assumptions: CostAssumptions) -> StudyCost:
    trials = list(trials)
    shard_sets = {trial.shard_set: trial.shard_bytes for trial in trials}
    return StudyCost(
        training_flops=math.fsum(trial.training_flops for trial in trials),
        gpu_hours=math.fsum(trial.gpu_hours for trial in trials),
        wall_hours=packed_wall_hours(trials, assumptions.gpus),
        checkpoint_bytes=sum(trial.kept_checkpoint_bytes for trial in trials),
        plain_adamw_checkpoint_bytes=sum(
            checkpoint_bytes_for(trial.parameters, "adamw") * trial.checkpoints_kept for trial in trials
        ),
        gpus_per_trial=gpus_per_trial_of(trials),
        shard_bytes=math.fsum(shard_sets.values()),
        shard_sets=len(shard_sets),
    )
