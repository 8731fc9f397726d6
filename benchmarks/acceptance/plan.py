"""What the acceptance run measures, at full size (a GPU, <= 8 minutes on an H100) and tiny (the CPU
mode in CI: the same code paths at debug sizes, < 1 minute on 2 cores)."""

from __future__ import annotations

from dataclasses import dataclass

# One debug size and one real size per family.
FAMILIES = {
    "mae": ("mae-debug", "mae-en768-12"),
    "audiomae++": ("audiomae++-debug", "audiomae++-base"),
    "axlstm": ("axlstm-debug", "axlstm-base"),
    "ssast": ("ssast-debug-patch", "ssast-base-patch"),
    "hubert": ("hubert-debug", "hubert-base"),
    "wav2vec2": ("wav2vec2-debug", "wav2vec2-base"),
}
# The papers' global batches: the scaling study's MAE 256 (Deng et al., App. B; reference/evaluation.md),
# AudioMAE++ 1024 (AudioMAE++ Sec. 4; reference/models.md).
STUDY_MAE_BATCH = 256
AUDIOMAE_PP_BATCH = 1024


@dataclass(frozen=True)
class Plan:
    name: str
    correctness_models: tuple[str, ...]
    compiled_correctness_models: tuple[str, ...]
    compile_backend: str  # inductor (what --compile runs) or eager (dynamo's graph capture only, seconds on a CPU)
    check_batch: int
    check_steps: int
    speed_runs: tuple[tuple[str, int, bool], ...]  # (model, global batch, compiled)
    profiled_models: tuple[str, ...]  # their speed runs are profiled too
    # (model, its shard preset, global batch, micro-batch when no speed run fitted one: about half the memory)
    reader_runs: tuple[tuple[str, str, int, int], ...]
    reader_counts: tuple[int, ...]
    warmup_steps: int
    timed_steps: int
    rankme_n: int
    rankme_dim: int
    probe_model: str
    clips_per_kind: int
    clip_s: float
    segment_s: float
    shard_presets: tuple[str, ...]
    codebook_clusters: int
    matmul_size: int


FULL = Plan(
    name="full",
    correctness_models=tuple(name for pair in FAMILIES.values() for name in pair),
    # The families whose forward is one graph. HuBERT's and wav2vec 2.0's break into 10-15 graphs by design
    # (the labeller and span masking are left out of compilation, the masked count varies per step):
    # minutes of compiling for little; tests/models/wave/test_hubert_compile.py compiles HuBERT on CPU.
    compiled_correctness_models=("mae-debug", "audiomae++-debug", "axlstm-debug", "ssast-debug-patch"),
    compile_backend="inductor", check_batch=8, check_steps=5,
    speed_runs=(  # eager first: the compiled runs start from the micro-batch their eager run fitted
        ("mae-en768-12", STUDY_MAE_BATCH, False), ("audiomae++-base", AUDIOMAE_PP_BATCH, False),
        ("hubert-base", 32, False), ("wav2vec2-base", 32, False), ("axlstm-base", 64, False),
        ("mae-en768-12", STUDY_MAE_BATCH, True), ("audiomae++-base", AUDIOMAE_PP_BATCH, True),
    ),
    profiled_models=("mae-en768-12", "audiomae++-base"),
    reader_runs=(("audiomae++-base", "audiomae", AUDIOMAE_PP_BATCH, 512), ("mae-en768-12", "dasheng", STUDY_MAE_BATCH, 256)),
    reader_counts=(1, 2, 4), warmup_steps=3, timed_steps=10,
    rankme_n=30_000, rankme_dim=768,  # the study's pool (Deng et al.: 30,000 crops) of a 768-wide encoder
    probe_model="audiomae++-base", clips_per_kind=60, clip_s=20.0, segment_s=10.0,
    shard_presets=("audiomae", "dasheng", "waveform"), codebook_clusters=100,  # HuBERT's k for MFCC targets
    matmul_size=8192,
)  # fmt: skip

TINY = Plan(
    name="tiny",
    correctness_models=tuple(debug for debug, _ in FAMILIES.values()),
    compiled_correctness_models=("mae-debug",),
    compile_backend="eager", check_batch=2, check_steps=3,
    speed_runs=(("mae-debug", 4, False), ("mae-debug", 4, True), ("audiomae++-debug", 4, False)),
    profiled_models=("audiomae++-debug",),
    reader_runs=(("audiomae++-debug", "audiomae", 4, 2),),
    reader_counts=(1, 2), warmup_steps=1, timed_steps=3,
    rankme_n=3000, rankme_dim=64,
    probe_model="audiomae++-debug", clips_per_kind=5, clip_s=6.0, segment_s=3.0,
    shard_presets=("audiomae", "waveform"), codebook_clusters=16,
    matmul_size=512,
)  # fmt: skip
