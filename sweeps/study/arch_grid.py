"""The `arch` grid's points: the RankMe study's Sec. IV-G architectures (Table IV) and our own families.

Paper profile: Table IV's settings, each trained by this pipeline on the study's shards (the paper
trained HuBERT, wav2vec 2.0 and Dasheng on AS2M+ACAV2M and scored public SSAST / conformer / lv60 /
robust weights, marked * there; public weights go beside a study with `pipeline.evaluate
--hear-module`, not as trials). Beside them our masked-modelling families at Base size.
CPU profile: each family's debug size, and a wider "large" debug size for the three families of
Table V (wav2vec 2.0, HuBERT, Dasheng's MAE), so the report's Table V analogue has both columns.

`scale` marks the point that stands for its architecture in Table V ("base" / "large"); Table IV
names Dasheng en768-12 "Base" and en1536-12 "Large".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BASE, LARGE = "base", "large"


@dataclass(frozen=True, kw_only=True)
class ArchitecturePoint:
    label: str  # the trial name's part, unique in the grid
    arch: str  # the family: one Q(R) per family
    model_name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    scale: str | None = None  # Table V column


CROSS_DECODER = {"decoder": "cross", "prediction_ratio": 0.25}


def _ssast(name: str, masked: int, scale: str | None = None) -> ArchitecturePoint:
    # Table IV writes e.g. "Base-Patch-400": size, patch kind, masked patches.
    size, kind = name.split("-")
    return ArchitecturePoint(
        label=f"ssast-{size}-{kind}-{masked}",
        arch="ssast",
        model_name=f"ssast-{size}-{kind}",
        overrides={"mask_patches": masked},
        scale=scale,
    )


PAPER_POINTS = [
    # Table IV, in its order.
    _ssast("tiny-frame", 400),
    _ssast("tiny-patch", 400),
    _ssast("small-patch", 400),
    _ssast("base-frame", 250),
    _ssast("base-frame", 400),
    _ssast("base-patch", 250),
    _ssast("base-patch", 400, BASE),
    ArchitecturePoint(
        label="w2v2-conformer-large-relpos",
        arch="wav2vec2-conformer",
        model_name="wav2vec2-conformer-large-relpos",
        scale=LARGE,
    ),
    ArchitecturePoint(
        label="w2v2-conformer-large-rope", arch="wav2vec2-conformer", model_name="wav2vec2-conformer-large-rope"
    ),
    ArchitecturePoint(label="hubert-base", arch="hubert", model_name="hubert-base", scale=BASE),
    ArchitecturePoint(label="hubert-large", arch="hubert", model_name="hubert-large", scale=LARGE),
    ArchitecturePoint(label="hubert-xlarge", arch="hubert", model_name="hubert-xlarge"),
    ArchitecturePoint(label="wav2vec2-base", arch="wav2vec2", model_name="wav2vec2-base", scale=BASE),
    ArchitecturePoint(label="wav2vec2-large", arch="wav2vec2", model_name="wav2vec2-large", scale=LARGE),
    ArchitecturePoint(label="mae-en768-12", arch="mae", model_name="mae-en768-12", scale=BASE),
    ArchitecturePoint(label="mae-en1024-12", arch="mae", model_name="mae-en1024-12"),
    ArchitecturePoint(label="mae-en1536-12", arch="mae", model_name="mae-en1536-12", scale=LARGE),
    ArchitecturePoint(label="mae-en1536-24", arch="mae", model_name="mae-en1536-24"),
    # Ours, at Base.
    ArchitecturePoint(label="audiomae++-base", arch="audiomae++", model_name="audiomae++-base", scale=BASE),
    ArchitecturePoint(label="axlstm-base", arch="axlstm", model_name="axlstm-base", scale=BASE),
    ArchitecturePoint(
        label="crossmae-en768-12", arch="crossmae", model_name="mae-en768-12", overrides=CROSS_DECODER, scale=BASE
    ),
]

CPU_POINTS = [
    # Table V's families first (their Base and Large), then the other Sec. IV-G ones, then ours: a study
    # cut short still has Table V's rows.
    ArchitecturePoint(label="mae", arch="mae", model_name="mae-debug", scale=BASE),
    ArchitecturePoint(
        label="mae-wide",
        arch="mae",
        model_name="mae-debug",
        overrides={"encoder_dim": 128, "encoder_heads": 8},
        scale=LARGE,
    ),
    ArchitecturePoint(label="hubert", arch="hubert", model_name="hubert-debug", scale=BASE),
    ArchitecturePoint(
        label="hubert-wide",
        arch="hubert",
        model_name="hubert-debug",
        overrides={"encoder_dim": 128, "encoder_heads": 8},
        scale=LARGE,
    ),
    ArchitecturePoint(label="wav2vec2", arch="wav2vec2", model_name="wav2vec2-debug", scale=BASE),
    ArchitecturePoint(
        label="wav2vec2-wide",
        arch="wav2vec2",
        model_name="wav2vec2-debug",
        overrides={"encoder_dim": 128, "encoder_heads": 8},
        scale=LARGE,
    ),
    ArchitecturePoint(label="ssast-patch", arch="ssast", model_name="ssast-debug-patch", scale=BASE),
    ArchitecturePoint(label="ssast-frame", arch="ssast", model_name="ssast-debug-frame"),
    ArchitecturePoint(
        label="w2v2-conformer-relpos",
        arch="wav2vec2-conformer",
        model_name="wav2vec2-conformer-debug-relpos",
        scale=BASE,
    ),
    ArchitecturePoint(
        label="w2v2-conformer-rope", arch="wav2vec2-conformer", model_name="wav2vec2-conformer-debug-rope"
    ),
    ArchitecturePoint(label="audiomae++", arch="audiomae++", model_name="audiomae++-debug", scale=BASE),
    ArchitecturePoint(label="axlstm", arch="axlstm", model_name="axlstm-debug", scale=BASE),
    ArchitecturePoint(label="crossmae", arch="crossmae", model_name="mae-debug", overrides=CROSS_DECODER, scale=BASE),
]


def architecture_points(profile: str) -> list[ArchitecturePoint]:
    return PAPER_POINTS if profile == "paper" else CPU_POINTS
