"""HuBERT's sizes against torchaudio's builders (a test-only oracle that reproduces fairseq's
modules) and the study's Table IV, and its training FLOPs against the ones torch counts."""

from __future__ import annotations

import contextlib
from unittest import mock

import pytest
import torch
import torchaudio
from torch.utils.flop_counter import FlopCounterMode

import models
from tests.support.hubert_fixtures import speech_codebook_and_crops

# The RankMe study, Table IV: HuBERT Base (95M), Large (317M), X-large (964M).
TABLE_IV_MILLIONS = {"hubert-base": 95, "hubert-large": 317, "hubert-xlarge": 964}
# torchaudio's label classes (hubert_pretrain_base num_classes=100; large and xlarge 500): ours by default.
TORCHAUDIO_CLASSES = {"hubert-base": 100, "hubert-large": 500, "hubert-xlarge": 500}


def _count_on_meta(name: str) -> int:
    with torch.device("meta"):
        return models.count_parameters(models.build_model(name))


# torch's random initialisers, in place. Counting parameters needs their shapes only: skipped, torchaudio's
# builders only allocate (X-Large: 0.1 s instead of ~35 s of random draws; its memory is never touched).
RANDOM_INITIALISERS = ("uniform_", "normal_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_",
                       "xavier_normal_", "trunc_normal_")  # fmt: skip


def _count_torchaudio(builder) -> int:
    """torchaudio's init copies data, so it cannot build on meta: it builds with the random draws skipped."""
    with contextlib.ExitStack() as stack:
        for name in RANDOM_INITIALISERS:
            stack.enter_context(mock.patch.object(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor))
        for name in ("uniform_", "normal_"):
            stack.enter_context(mock.patch.object(torch.Tensor, name, lambda tensor, *args, **kwargs: tensor))
        return sum(p.numel() for p in builder().parameters())


@pytest.mark.parametrize(
    "name,builder",
    [
        ("hubert-base", torchaudio.models.hubert_pretrain_base),
        ("hubert-large", torchaudio.models.hubert_pretrain_large),
    ],
)
def test_parameters_equal_torchaudio_and_round_to_table_iv(name, builder):
    ours = _count_on_meta(name)
    assert ours == _count_torchaudio(builder)  # base 94,594,176; large 316,606,336
    assert round(ours / 1e6) == TABLE_IV_MILLIONS[name]


def test_xlarge_parameters_equal_torchaudio_and_round_to_table_iv():
    ours = _count_on_meta("hubert-xlarge")
    assert ours == _count_torchaudio(torchaudio.models.hubert_pretrain_xlarge) == 964_317_568
    assert round(ours / 1e6) == TABLE_IV_MILLIONS["hubert-xlarge"]


def test_xlarge_on_meta_rounds_to_table_iv():
    assert _count_on_meta("hubert-xlarge") == 964_317_568  # torchaudio's count (the test above)


@pytest.mark.parametrize("name", sorted(TORCHAUDIO_CLASSES))
def test_label_embeddings_are_clusters_by_final_dim(name):
    with torch.device("meta"):
        model = models.build_model(name)
    assert model.label_embeddings.shape == (
        TORCHAUDIO_CLASSES[name],
        {"hubert-base": 256, "hubert-large": 768, "hubert-xlarge": 1024}[name],
    )


def test_the_teacher_free_parts_are_not_parameters_and_the_codebook_sets_k(tmp_path):
    codebook, _ = speech_codebook_and_crops(tmp_path, clusters=8)
    without = models.build_model("hubert-debug")
    with_codebook = models.build_model("hubert-debug", codebook=str(codebook))
    # 100 default classes -> 8 from the codebook: only the label embeddings change (final_dim 32)
    assert models.count_parameters(without) - models.count_parameters(with_codebook) == (100 - 8) * 32


def test_training_flops_match_the_counted_matmuls_and_convolutions(tmp_path):
    codebook, crops = speech_codebook_and_crops(tmp_path)
    torch.manual_seed(0)
    model = models.build_model("hubert-debug", codebook=str(codebook))
    labelling = FlopCounterMode(display=False)
    with labelling:  # the MFCC filterbank matmuls: not part of the model's training FLOPs
        model.label_frames(crops)
    counter = FlopCounterMode(display=False)
    with counter:
        out = model(crops)
        out.loss.backward()
    counted = sum(counter.get_flop_counts()["Global"].values()) - sum(labelling.get_flop_counts()["Global"].values())
    # 6N counts the head on the expected masked share before the same-count trimming (0.61 for 100
    # frames; a batch of 6 keeps ~0.5) and biases and norms, which no matmul does; the position conv
    # computes one extra output step (even kernel), and the first conv's input gradient is not computed.
    ratio = counted / len(crops) / model.training_flops_per_sample()
    assert 0.9 < ratio < 1.05
