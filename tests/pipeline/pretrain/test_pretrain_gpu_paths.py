"""The pretraining step's GPU code paths, run on CPU against eager fp32 (issue #16, item 7).

On GPU a run takes bf16 autocast (`--precision`, default there), fused AdamW (`build_training`
passes `fused=True` on CUDA) and, with `--compile`, `torch.compile`. Each is run here on CPU through
the worker's own step (`tests.support.pretrain_steps`) and compared with the plain fp32 path on the
same weights, batch and masks. Tolerances are the measured differences (torch 2.9.1, AMD EPYC, one
thread) with margin; each test also checks the path really ran, so none can pass by doing nothing.
bitsandbytes' AdamW8bit needs a GPU and is not exercised here.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

import models
from pipeline.pretrain.config import PretrainConfig
from tests.support.pretrain_steps import one_torch_thread, train_steps  # noqa: F401 (fixture)

# Measured max |bf16 - fp32| / fp32 loss over 5 steps: 1.0e-4 mae, 2.2e-4 audiomae++, 1.2e-4 axlstm.
# The losses fall by 3.3-13% over those steps, 16x or more this tolerance.
BF16_LOSS_RTOL = 2e-3
# Measured max |compiled - eager| / eager loss over 3 steps of one-block mae-debug: 9.6e-8 (one float32
# ulp at 1.24; 1.2e-7 with mae-debug's two blocks).
COMPILED_LOSS_RTOL = 1e-5
# Measured ||fused - default|| / ||default - initial|| over all parameters after 5 steps: 4.6e-5 mae,
# 8.1e-5 audiomae++, 1.0e-6 axlstm. Most of it is the qkv bias's key part, whose gradient is zero up
# to rounding (softmax ignores a shift shared by all keys) and which Adam scales up to lr-sized steps.
# Leaving out weight decay, for scale, moves the parameters 5.8e-3 of the update (mae-debug).
FUSED_PARAMETER_RTOL = 5e-4

DEBUG_MODELS = ["mae-debug", "audiomae++-debug", "axlstm-debug"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # one thread: steady under shared cores


@pytest.mark.parametrize("name", DEBUG_MODELS)
def test_bf16_autocast_on_cpu_tracks_fp32_over_five_steps(name):
    fp32 = train_steps(name, steps=5, precision="fp32")
    bf16 = train_steps(name, steps=5, precision="bf16")
    assert fp32.linear_output_dtypes == {torch.float32}
    assert bf16.linear_output_dtypes == {torch.bfloat16}  # autocast ran every linear layer in bf16
    assert bf16.losses != fp32.losses  # and its rounding reached the loss
    assert fp32.losses[0] - fp32.losses[-1] > 10 * BF16_LOSS_RTOL * fp32.losses[0]  # the steps trained
    np.testing.assert_allclose(bf16.losses, fp32.losses, rtol=BF16_LOSS_RTOL)


def test_cpu_default_precision_is_fp32_as_before():
    default = train_steps("mae-debug", steps=2)
    assert default.linear_output_dtypes == {torch.float32}
    assert default.losses == train_steps("mae-debug", steps=2, precision="fp32").losses


def test_unknown_precision_is_refused_naming_the_flag():
    with pytest.raises(ValueError, match=r"--precision must be one of \('fp32', 'bf16'\), got 'fp16'"):
        PretrainConfig.from_flat(precision="fp16")


def test_fused_adamw_on_cpu_updates_the_parameters_like_the_default_adamw():
    for name in DEBUG_MODELS:
        torch.manual_seed(0)
        initial = _flat_parameters(models.build_model(name))
        default = _flat_parameters(train_steps(name, steps=5, precision="fp32").model)
        fused = _flat_parameters(train_steps(name, steps=5, precision="fp32", fused_adamw=True).model)
        update = (default - initial).norm()
        assert update > 0.1, name  # the steps moved the weights
        assert (fused - default).norm() / update < FUSED_PARAMETER_RTOL, name


def test_compiled_model_steps_like_eager():
    """`--compile` wraps the (DDP) model in torch.compile with the default backend, inductor, which
    on CPU writes and compiles C++. Inductor draws its own random numbers unless `fallback_random`,
    which would give the compiled model other masks (losses 1e-3 apart, relative). One encoder block
    instead of two keeps the cold compile near 35 s on this 2-core machine (40-65 s with two)."""
    if not any(shutil.which(compiler) for compiler in ("g++", "c++", "clang++")):
        pytest.skip("torch.compile's inductor backend needs a C++ compiler on CPU and none is on PATH")
    # aot_eager, the usual compiler-free fallback, cannot stand in: on torch 2.9.1 it turns patchify's
    # reshape of a permuted tensor into a view and fails with "view size is not compatible".
    eager = train_steps("mae-debug", steps=3, precision="fp32", encoder_depth=1)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    try:
        with torch._inductor.config.patch(fallback_random=True):
            compiled = train_steps("mae-debug", steps=3, precision="fp32", compile_backend="inductor", encoder_depth=1)
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    finally:
        torch._dynamo.reset()
    assert graphs >= 1  # dynamo captured the model, so inductor's code computed these losses
    assert eager.losses[0] - eager.losses[-1] > 0.01  # the steps trained
    np.testing.assert_allclose(compiled.losses, eager.losses, rtol=COMPILED_LOSS_RTOL)


def _flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([parameter.detach().flatten() for parameter in model.parameters()])
