"""Running statistics of normalisation layers: found, kept aside, and re-estimated on fixed inputs.

A BatchNorm read out in eval mode normalises with running statistics that training moves as an
exponential average of the batches it saw (the study MAE's input BatchNorm over mel bins, Dasheng's
`init_bn`, momentum 0.01; the conformer's BatchNorm). Two readouts of the same weights then differ
by where that average happened to be: at initialisation it is mean 0, variance 1, after a few
hundred steps it is near the crop stream's. Re-estimating the statistics of every readout on one
fixed set of inputs ("precise BN": an equal-weight average over the set, as Wu & Johnson,
"Rethinking 'Batch' in BatchNorm", 2021, recommend for evaluation) removes that difference: two
models with equal weights then read out equally.

Only the statistics change: the affine weights, every other module and the model's train/eval
state are as before (dropout stays off during the pass, so the inputs the layers see are the
readout's inputs, not training's).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator

import torch
from torch import nn

RUNNING_STATS_LAYERS = (nn.modules.batchnorm._BatchNorm,)  # the layers whose eval output depends on history


def running_stats_layers(model: nn.Module) -> list[nn.Module]:
    """The model's layers that normalise with running statistics in eval mode."""
    return [
        module
        for module in model.modules()
        if isinstance(module, RUNNING_STATS_LAYERS) and module.track_running_stats and module.running_mean is not None
    ]


def has_running_stats(model: nn.Module) -> bool:
    return bool(running_stats_layers(model))


@contextlib.contextmanager
def kept_running_stats(model: nn.Module) -> Iterator[None]:
    """Whatever happens to the running statistics inside the block is undone when it ends."""
    layers = running_stats_layers(model)
    saved = [
        (layer.running_mean.clone(), layer.running_var.clone(), layer.num_batches_tracked.clone(), layer.momentum)
        for layer in layers
    ]
    try:
        yield
    finally:
        for layer, (mean, var, count, momentum) in zip(layers, saved, strict=True):
            layer.running_mean.copy_(mean)
            layer.running_var.copy_(var)
            layer.num_batches_tracked.copy_(count)
            layer.momentum = momentum


@torch.no_grad()
def reestimate_running_stats(
    model: nn.Module, batches: Iterable[torch.Tensor], forward: Callable[[torch.Tensor], object]
) -> int:
    """Replaces every running mean and variance by its equal-weight average over `batches`, each
    passed through `forward` (the readout, e.g. `model.embed`); returns the number of batches.

    Every batch counts once (torch's cumulative average, momentum None), so the result depends only
    on the batches and their order, never on what the model saw before. A model without
    running-statistics layers is left as it is (0 batches read), and so is a layer `forward` never
    reaches (an EMA teacher's, which the readout does not use)."""
    layers = running_stats_layers(model)
    if not layers:
        return 0
    batches = iter(batches)
    first = next(batches, None)
    if first is None:  # checked before the statistics are reset: an empty set must not erase them
        raise ValueError("re-estimating running statistics needs at least one batch of inputs")
    was_training = {module: module.training for module in model.modules()}
    momenta = [layer.momentum for layer in layers]
    model.eval()
    reset: set[nn.Module] = set()

    def reset_on_first_use(layer: nn.Module, inputs: object) -> None:
        if layer not in reset:
            layer.reset_running_stats()
            reset.add(layer)

    hooks = [layer.register_forward_pre_hook(reset_on_first_use) for layer in layers]
    for layer in layers:
        layer.momentum = None
        layer.train()
    count = 0
    try:
        for batch in itertools.chain([first], batches):
            forward(batch)
            count += 1
    finally:
        for hook in hooks:
            hook.remove()
        for layer, momentum in zip(layers, momenta, strict=True):
            layer.momentum = momentum
        for module, training in was_training.items():
            module.train(training)
    return count
