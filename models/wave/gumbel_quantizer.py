"""wav2vec 2.0's Gumbel-softmax product quantizer and its diversity penalty.

The quantizer turns each feature-encoder frame into a codevector: G codebooks (groups) of V
entries; a linear map gives G x V logits, each group picks one entry, and the G chosen entries
(each final_dim / G wide) are concatenated (wav2vec 2.0, Baevski et al. 2020, Sec. 2: G = 2,
V = 320, "d/G" per entry; fairseq Wav2Vec2Config latent_groups=2, latent_vars=320, codevectors of
vq_dim / groups with vq_dim = final_dim: 256 Base, 768 Large).

Choosing is a straight-through Gumbel softmax in training (forward: the hard one-hot of
argmax(logits + Gumbel noise) / tau; backward: the gradient of the soft probabilities) and the
plain argmax in evaluation (fairseq GumbelVectorQuantizer). The temperature tau decays per update
from 2 to a floor, tau(step) = max(2 x 0.999995^step, floor): 0.5 for Base, 0.1 for Large
(Sec. 4.2; fairseq latent_temp (2, 0.5, 0.999995) default, (2.0, 0.1, 0.999995) in
wav2vec2_large_librivox.yaml). The step counter is a buffer, so it travels with checkpoints.

Diversity penalty (Sec. 3.2): L_d = (G V - sum_g exp(H(p_bar_g))) / (G V), with p_bar_g the
softmax of the logits (no Gumbel noise) averaged over every quantized frame of the batch; it is
0 when every entry of every codebook is used equally. Entropies use log(p + 1e-7) as fairseq.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

PERPLEXITY_LOG_EPS = 1e-7  # fairseq: torch.log(avg_probs + 1e-7)


@dataclass(frozen=True, kw_only=True)
class TemperatureSchedule:
    start: float = 2.0
    floor: float = 0.5
    decay_per_step: float = 0.999995

    def at(self, step: int) -> float:
        return max(self.start * self.decay_per_step**step, self.floor)


@dataclass(frozen=True)
class Quantized:
    vectors: torch.Tensor  # (..., codevector_dim): the concatenated chosen entries
    codes: torch.Tensor  # (..., groups) long: the entry chosen in each codebook (the argmax)
    prob_perplexity: torch.Tensor  # scalar: sum over groups of exp(entropy of the mean softmax)
    code_perplexity: torch.Tensor  # scalar, no gradient: the same for the argmax counts


def perplexity(probabilities: torch.Tensor) -> torch.Tensor:
    """(groups, entries) mean probabilities -> sum over groups of exp(entropy)."""
    entropy = -(probabilities * torch.log(probabilities + PERPLEXITY_LOG_EPS)).sum(dim=-1)
    return entropy.exp().sum()


def diversity_penalty(prob_perplexity: torch.Tensor, n_codewords: int) -> torch.Tensor:
    """(G V - perplexity) / (G V): 0 at uniform use of every codebook entry, near 1 at collapse."""
    return (n_codewords - prob_perplexity) / n_codewords


class GumbelProductQuantizer(nn.Module):
    def __init__(
        self,
        input_dim: int,
        *,
        groups: int = 2,
        entries: int = 320,
        codevector_dim: int = 256,
        temperature: TemperatureSchedule | None = None,
    ) -> None:
        super().__init__()
        if codevector_dim % groups:
            raise ValueError(f"codevector_dim={codevector_dim} does not split into {groups} groups")
        self.groups, self.entries = groups, entries
        self.temperature = temperature or TemperatureSchedule()
        self.logits = nn.Linear(input_dim, groups * entries)  # fairseq weight_proj
        nn.init.normal_(self.logits.weight, mean=0.0, std=1.0)  # fairseq: normal_(0, 1), bias 0
        nn.init.zeros_(self.logits.bias)
        # fairseq `vars`: (1, G V, d / G), uniform in [0, 1)
        self.codebooks = nn.Parameter(torch.rand(groups * entries, codevector_dim // groups))
        self.register_buffer("step", torch.zeros((), dtype=torch.long))

    @property
    def n_codewords(self) -> int:
        return self.groups * self.entries

    @property
    def current_temperature(self) -> float:
        return self.temperature.at(int(self.step))

    def forward(self, x: torch.Tensor) -> Quantized:
        """x (..., input_dim) -> Quantized; perplexities are over all frames of x."""
        leading = x.shape[:-1]
        logits = self.logits(x).reshape(-1, self.groups, self.entries).float()  # (n, G, V)
        codes = logits.argmax(dim=-1)  # (n, G)
        with torch.no_grad():
            hard_counts = F.one_hot(codes, self.entries).float().mean(dim=0)
            code_perplexity = perplexity(hard_counts)
        prob_perplexity = perplexity(logits.softmax(dim=-1).mean(dim=0))
        if self.training:
            one_hot = F.gumbel_softmax(logits, tau=self.current_temperature, hard=True)
        else:
            one_hot = F.one_hot(codes, self.entries).to(logits.dtype)
        books = self.codebooks.view(self.groups, self.entries, -1)
        # (n, G, V) x (G, V, d/G) -> (n, G, d/G): each group's one-hot selects one entry
        chosen = torch.einsum("ngv,gvd->ngd", one_hot.to(books.dtype), books)
        return Quantized(
            vectors=chosen.reshape(*leading, -1),
            codes=codes.reshape(*leading, self.groups),
            prob_perplexity=prob_perplexity,
            code_perplexity=code_perplexity,
        )

    def advance_step(self) -> None:
        """One optimizer update done: the temperature decays one notch."""
        self.step += 1

    def set_step(self, step: int) -> None:
        if step < 0:
            raise ValueError(f"step={step} must be >= 0")
        self.step.fill_(step)
