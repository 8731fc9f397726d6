"""Span masking over time frames, as wav2vec 2.0 and HuBERT mask their feature-encoder frames.

The papers state it as: every frame starts a span with probability p, a span covers the
`span_frames` frames from its start, spans may overlap (wav2vec 2.0, Baevski et al. 2020, Sec. 3.1:
p = 0.065, M = 10; HuBERT, Hsu et al. 2021, Sec. IV-D: p = 8%, l = 10). The code both papers ran
is fairseq's `compute_mask_indices` (fairseq/data/data_utils.py), whose `mask_prob` is p x M
(wav2vec 2.0's configs say mask_prob 0.65, HuBERT's 0.80). Its exact rule, reproduced here:

1. spans per clip: n = max(min_spans, int(mask_prob x T / M + u)) = max(min_spans, int(p T + u)),
   u ~ U[0, 1) ("+ np.random.rand()": stochastic rounding, so E[n] = p T when p T >= min_spans);
   the models pass min_masks=2 (Wav2Vec2Model.apply_mask, HubertModel.apply_mask).
2. starts: n distinct frames drawn uniformly without replacement from [0, T - M)
   (`rng.choice(sz - min_len, num_mask, replace=False)`; when T - M <= n, from [0, T - n - 1)).
3. the union of the spans is masked; spans never run past the end (starts < T - M).
4. `require_same_masks=True` (the default the models use): every clip keeps exactly as many masked
   frames as the clip of the batch with the fewest, dropping the surplus of the others at random,
   so the masked frames of a batch reshape to (batch, n_masked, dim).

With overlaps the masked fraction is below p M: each frame is covered with probability about
1 - (1 - n / (T - M))^M (0.496 for wav2vec 2.0 on 500 frames, 0.65 nominal).

mask: True = masked (the frame's encoder input is replaced by the mask embedding).
"""

from __future__ import annotations

import torch

from models.layers.masking import check_mask_ratio

# wav2vec 2.0 / HuBERT pass min_masks=2 to compute_mask_indices (fairseq Wav2Vec2Model.apply_mask).
MIN_SPANS = 2


def count_span_starts(n_frames: int, start_probability: float, uniform: float, *, min_spans: int = MIN_SPANS) -> int:
    """fairseq's span count for one clip: max(min_spans, int(p x T + u)), u in [0, 1)."""
    if not 0.0 <= uniform < 1.0:
        raise ValueError(f"uniform={uniform} must be a draw from [0, 1)")
    return max(min_spans, int(start_probability * n_frames + uniform))


def _draw_starts(n_frames: int, n_spans: int, span_frames: int, generator: torch.Generator | None) -> torch.Tensor:
    """n distinct start frames, uniform over [0, T - M) (fairseq's idc_select_ver=1)."""
    n_candidates = n_frames - span_frames
    if n_candidates <= n_spans:  # fairseq: min_len = sz - num_mask - 1
        n_candidates = n_frames - n_spans - 1
    if n_candidates < n_spans:
        raise ValueError(
            f"{n_frames} frames are too few for {n_spans} distinct span starts "
            f"({span_frames}-frame spans): use crops of at least {2 * n_spans + 1} frames"
        )
    return torch.randperm(n_candidates, generator=generator)[:n_spans]


@torch.compiler.disable  # host-side random draws with data-dependent sizes: outside compiled graphs
def span_mask(
    batch: int,
    n_frames: int,
    *,
    start_probability: float,
    span_frames: int,
    min_spans: int = MIN_SPANS,
    same_count_per_row: bool = True,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """(batch, n_frames) bool mask, True = masked, drawn by fairseq's compute_mask_indices rule.

    `start_probability` is the papers' p (fairseq's mask_prob / mask_length). Draws happen on the
    CPU (a seeded `generator` makes them reproducible) and the mask moves to `device`.
    """
    if not 0.0 < start_probability < 1.0:
        raise ValueError(f"start_probability={start_probability} must be in (0, 1)")
    if span_frames < 1:
        raise ValueError(f"span_frames={span_frames} must be at least 1")
    # fairseq draws one u for the whole batch when no clip is padded (all clips have T frames)
    uniform = torch.rand((), generator=generator).item()
    n_spans = count_span_starts(n_frames, start_probability, uniform, min_spans=min_spans)
    offsets = torch.arange(span_frames)
    rows = []
    for _ in range(batch):
        starts = _draw_starts(n_frames, n_spans, span_frames, generator)
        frames = (starts[:, None] + offsets).flatten()
        rows.append(torch.unique(frames[frames < n_frames]))
    mask = torch.zeros(batch, n_frames, dtype=torch.bool)
    fewest = min(len(row) for row in rows)
    for index, row in enumerate(rows):
        if same_count_per_row and len(row) > fewest:
            row = row[torch.randperm(len(row), generator=generator)[:fewest]]
        mask[index, row] = True
    return mask.to(device)


def expected_masked_fraction(n_frames: int, start_probability: float, span_frames: int) -> float:
    """1 - (1 - n / (T - M))^M with n = p T: the coverage of overlapping spans before the
    same-count trimming (which removes a little more)."""
    n_spans = max(MIN_SPANS, start_probability * n_frames)
    return 1.0 - (1.0 - n_spans / (n_frames - span_frames)) ** span_frames


def start_probability_for_fraction(mask_ratio: float, n_frames: int, span_frames: int) -> float:
    """The p whose expected coverage on `n_frames` frames is `mask_ratio` (the inverse of
    `expected_masked_fraction` while p T >= MIN_SPANS)."""
    check_mask_ratio(mask_ratio, where="mask_ratio")
    if n_frames <= span_frames:
        raise ValueError(f"{n_frames} frames cannot hold a {span_frames}-frame span: use longer crops")
    per_candidate = 1.0 - (1.0 - mask_ratio) ** (1.0 / span_frames)
    return per_candidate * (n_frames - span_frames) / n_frames


class SpanMaskedConfig:
    """The masking arithmetic of a config with `mask_ratio` (None: use p), `mask_start_probability` (p),
    `crop_frames` and `mask_span_frames`: wav2vec 2.0's and HuBERT's configs share it."""

    mask_ratio: float | None
    mask_start_probability: float
    crop_frames: int
    mask_span_frames: int

    @property
    def span_start_probability(self) -> float:
        """p used for masking: solved from mask_ratio when that is set."""
        if self.mask_ratio is None:
            return self.mask_start_probability
        return start_probability_for_fraction(self.mask_ratio, self.crop_frames, self.mask_span_frames)

    @property
    def expected_mask_ratio(self) -> float:
        return expected_masked_fraction(self.crop_frames, self.span_start_probability, self.mask_span_frames)
