"""The worker's step function (`pipeline.pretrain.step.forward_backward`) on a real debug model, on CPU."""

from __future__ import annotations

import itertools

import pytest
import torch

import models
from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.step import forward_backward
from tests.pipeline.pretrain_steps import BATCH_SIZE, CPU, fixed_log_mel_batch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_each_step_gradient_is_its_own_batch_alone():
    """Two steps on the same batch and masks, with no update between, have the same gradient. Before
    the step cleared gradients, the second one also held the first's clipped gradient: norm 1.07 then 2.07."""
    config = PretrainConfig(model_name="mae-debug", global_batch_size=BATCH_SIZE)
    torch.manual_seed(0)
    model = models.build_model("mae-debug")
    batches = itertools.repeat(fixed_log_mel_batch(model))
    norms, gradients = [], []
    for step in (1, 2):
        torch.manual_seed(1)  # the same masks both times
        _, grad_norm = forward_backward(model, batches, config=config, step=step, device=CPU, rank=0, node_id="t")
        norms.append(float(grad_norm))
        gradients.append(model.encoder.patch_embed.weight.grad.clone())
    assert norms[1] == pytest.approx(norms[0], rel=1e-6)
    torch.testing.assert_close(gradients[1], gradients[0])
