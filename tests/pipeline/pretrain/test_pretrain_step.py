"""The worker's step function (`pipeline.pretrain.step.forward_backward`) on a real debug model, on CPU."""

from __future__ import annotations

import itertools

import pytest
import torch

import models
from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.step import forward_backward
from tests.support.pretrain_steps import (  # noqa: F401 (fixture)
    BATCH_SIZE,
    CPU,
    fixed_log_mel_batch,
    one_torch_thread,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # one thread: steady under shared cores


def test_each_step_gradient_is_its_own_batch_alone():
    """Two steps on the same batch and masks, with no update between, have the same gradient. Before
    the step cleared gradients, the second one also held the first's clipped gradient: norm 1.07 then 2.07."""
    config = PretrainConfig.from_flat(model_name="mae-debug", global_batch_size=BATCH_SIZE)
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


def _gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


def test_accumulated_micro_batches_average_into_one_batch_gradient():
    # Within one step the micro-batches do accumulate: two halves give the gradient of the whole mean.
    torch.manual_seed(0)
    model = models.build_model("mae-debug", mask_ratio=0.5)
    mel = torch.randn(2, model.spec.crop_frames, model.spec.n_mels)
    halves = PretrainConfig.from_flat(
        model_name="mae-debug", global_batch_size=2, micro_batch_size=1, grad_clip_norm=1e9
    )
    torch.manual_seed(1)
    loss, _ = forward_backward(model, iter([mel[:1], mel[1:]]), config=halves, step=1, device=CPU, rank=0,
                               node_id="local")  # fmt: skip
    accumulated = _gradients(model)
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)  # the same two masks, drawn one micro-batch at a time
    expected_loss = (model(mel[:1]).loss + model(mel[1:]).loss) / 2
    expected_loss.backward()
    torch.testing.assert_close(loss, expected_loss.detach())
    for name, grad in _gradients(model).items():
        torch.testing.assert_close(accumulated[name], grad, msg=lambda m, name=name: f"{name}: {m}")


def test_a_models_update_schedule_counts_optimizer_steps_not_micro_batches():
    """wav2vec 2.0's Gumbel temperature decays per update (x0.999995, wav2vec 2.0 Sec. 4.2): with 3
    micro-batches per step, update 11 still anneals from 10 finished updates, not from 3 per update."""
    config = PretrainConfig.from_flat(model_name="wav2vec2-debug", global_batch_size=6, micro_batch_size=2)
    torch.manual_seed(0)
    model = models.build_model("wav2vec2-debug")
    crops = torch.randn(2, model.spec.crop_frames, model.spec.n_mels)
    seen = []
    model.quantizer.register_forward_pre_hook(lambda module, args: seen.append(int(module.step)))
    forward_backward(model, itertools.repeat(crops), config=config, step=11, device=CPU, rank=0, node_id="t")
    assert seen == [10, 10, 10]


def test_a_clip_norm_of_zero_measures_the_norm_and_clips_nothing():
    """Dasheng's training clips no gradient (--grad-clip-norm 0); the norm is still logged."""
    model = models.build_model("mae-debug", mask_ratio=0.5)
    mel = torch.randn(2, model.spec.crop_frames, model.spec.n_mels) * 50.0  # a large loss: a large gradient
    norms, gradients = [], []
    for bound in (0.0, 1e-3):
        model.zero_grad(set_to_none=True)
        config = PretrainConfig.from_flat(model_name="mae-debug", global_batch_size=2, grad_clip_norm=bound)
        torch.manual_seed(1)
        _, grad_norm = forward_backward(model, iter([mel]), config=config, step=1, device=CPU, rank=0, node_id="t")
        norms.append(float(grad_norm))
        gradients.append(torch.cat([g.flatten() for g in _gradients(model).values()]))
    assert norms[0] == pytest.approx(norms[1]) and norms[0] > 1e-3  # the same pre-clip norm is reported
    assert float(gradients[0].norm()) == pytest.approx(norms[0], rel=1e-4)  # unclipped
    assert float(gradients[1].norm()) == pytest.approx(1e-3, rel=1e-3)  # clipped to the bound
