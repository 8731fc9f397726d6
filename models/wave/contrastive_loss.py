"""wav2vec 2.0's contrastive task: pick the true quantized frame among distractors.

For each masked frame t, with c_t the projected context vector and q_t the projected quantized
target, L_m = -log( exp(sim(c_t, q_t) / kappa) / sum_{q in Q_t} exp(sim(c_t, q) / kappa) ), sim the
cosine similarity, Q_t = q_t plus K distractors (wav2vec 2.0, Baevski et al. 2020, Sec. 3.2:
kappa = 0.1, K = 100; fairseq Wav2Vec2Config logit_temp=0.1, num_negatives=100).

Distractors (fairseq Wav2Vec2Model.sample_negatives): K indices drawn uniformly, with replacement,
from the other masked frames of the same clip - an index is drawn from [0, M - 1) and shifted up
by one when it reaches the frame's own index, so a frame is never its own distractor. A distractor
whose vector equals the positive exactly (the same codevectors chosen) is taken out of the
softmax (fairseq compute_preds: its logit set to a huge negative value; here -inf).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


@torch.compiler.disable  # a random draw whose size is the data-dependent masked count
def sample_distractor_indices(
    batch: int,
    n_masked: int,
    n_distractors: int,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """(batch, n_masked, n_distractors) long indices into the clip's masked frames, never the
    frame itself."""
    if n_masked < 2:
        raise ValueError(f"{n_masked} masked frame(s) per clip: distractors need at least 2; use longer crops")
    drawn = torch.randint(0, n_masked - 1, (batch, n_masked, n_distractors), generator=generator)
    own = torch.arange(n_masked)[None, :, None]
    return (drawn + (drawn >= own).long()).to(device)


def gather_distractors(targets: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """targets (batch, M, dim), indices (batch, M, K) -> (batch, M, K, dim)."""
    batch, n_masked, n_distractors = indices.shape
    flat = indices.reshape(batch, n_masked * n_distractors, 1).expand(-1, -1, targets.shape[-1])
    return torch.gather(targets, 1, flat).view(batch, n_masked, n_distractors, -1)


def contrastive_logits(
    context: torch.Tensor, targets: torch.Tensor, distractors: torch.Tensor, temperature: float
) -> torch.Tensor:
    """context, targets (batch, M, dim); distractors (batch, M, K, dim) -> logits (batch, M, 1 + K),
    the positive first: cosine similarity / temperature, -inf where a distractor equals it."""
    candidates = torch.cat([targets.unsqueeze(2), distractors], dim=2)  # (batch, M, 1 + K, dim)
    logits = F.cosine_similarity(context.float().unsqueeze(2), candidates.float(), dim=-1)
    logits = logits / temperature
    same_as_positive = (distractors == targets.unsqueeze(2)).all(dim=-1)  # (batch, M, K)
    blocked = F.pad(same_as_positive, (1, 0), value=False)
    return logits.masked_fill(blocked, float("-inf"))


def contrastive_loss(logits: torch.Tensor) -> torch.Tensor:
    """Mean over masked frames of the cross entropy with the positive (index 0) as the label."""
    flat = logits.reshape(-1, logits.shape[-1])
    return F.cross_entropy(flat, torch.zeros(flat.shape[0], dtype=torch.long, device=flat.device))
