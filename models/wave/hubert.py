"""HuBERT (Hsu et al. 2021): masked prediction of k-means cluster labels from the raw waveform,
`hubert-{base,large,xlarge}` (the RankMe study's Table IV: 95M / 317M / 964M) and `hubert-debug`.

Input: the `waveform` preset, (batch, frames, 320) float32, one stored frame per 20 ms encoder frame.
Pipeline, as fairseq's HubertModel: wav2vec 2.0's conv feature encoder -> LayerNorm -> Linear to the
model width (models/wave/feature_encoder.py) -> span masking (p = 8%, l = 10, models/wave/span_masking.py),
masked frames replaced by a learned mask embedding -> conv position embedding + transformer
(models/wave/context.py) -> final_proj to final_dim -> logits = cosine(proj(o_t), e_c) / 0.1 against
one embedding e_c per cluster -> cross-entropy on the masked frames only (HuBERT Sec. II-B with
alpha = 1: fairseq pred_masked_weight 1, pred_nomask_weight 0), plus fairseq's feature penalty
(10 x the mean squared conv feature; hubert criterion loss_weights [10]).

Targets: the model holds the codebook (`codebook=DIR` from `python -m pipeline.targets`) as a buffer
and labels each crop on the fly (models/wave/hubert_labels.py), one label per 20 ms frame.

Targets of iteration 2 (a trained HuBERT's layer output) come the same way: the codebook folder
holds the teacher's layers up to the chosen one, which the model carries frozen (models/wave/hubert_teacher.py).

Not reproduced: LayerDrop (Base 0.05; skipped blocks break DistributedDataParallel without
find_unused_parameters, see models/wave/context.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from models.config_overrides import apply_overrides
from models.interface import MaskedOutput, ModelSpec, count_parameters
from models.registry import register_model
from models.wave.hubert_codebook import frame_labeller, read_codebook
from models.wave.hubert_config import (
    FRAME_HOP_MS,
    HubertConfig,
    hubert_base_config,
    hubert_debug_config,
    hubert_large_config,
    hubert_xlarge_config,
)
from models.wave.hubert_encoder import build_hubert_encoder
from models.wave.span_masking import span_mask

# The weight-norm magnitude g of the position convolution: a scale, like a norm's, so never decayed.
WEIGHT_NORM_SCALE_SUFFIX = "parametrizations.weight.original0"


class MissingCodebookError(ValueError):
    """`forward` of a HuBERT built without a codebook: there is nothing to predict."""


class HuBERT(nn.Module):
    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        self.config = config
        codebook = read_codebook(config.codebook) if config.codebook is not None else None
        self.n_clusters = codebook.clusters if codebook is not None else config.clusters
        self.spec = ModelSpec(
            name=config.name, n_mels=config.n_mels, crop_frames=config.crop_frames, patch_frames=1,
            patch_bins=config.patch_bins, frontend_preset=config.frontend_preset, embed_dim=config.encoder_dim,
            frame_hop_ms=FRAME_HOP_MS,
            # spans overlap: the expected masked share is below p x l (0.57 for 500 frames, not 0.8), and a
            # batch's same-count trimming lowers it a little more (~0.52 for 8 crops)
            mask_ratio=config.expected_mask_ratio,
        )  # fmt: skip
        self.encoder = build_hubert_encoder(config)
        # fairseq: nn.Parameter(torch.FloatTensor(encoder_embed_dim).uniform_()), i.e. U[0, 1)
        self.mask_embedding = nn.Parameter(torch.empty(config.encoder_dim).uniform_())
        self.final_proj = nn.Linear(config.encoder_dim, config.final_dim)
        # fairseq: label_embs_concat = Parameter(FloatTensor(classes, final_dim)), nn.init.uniform_ (U[0, 1))
        self.label_embeddings = nn.Parameter(torch.empty(self.n_clusters, config.final_dim).uniform_())
        # MFCC (iteration 1) or a frozen teacher's layer (iteration 2): buffers and frozen weights only
        self.labeller = frame_labeller(config.codebook, codebook) if codebook is not None else None

    @property
    def lr_scale(self) -> float:
        return 1.0

    @property
    def needs_codebook(self) -> bool:
        """True when built without a codebook: no targets yet (pipeline.pretrain fits or reuses one)."""
        return self.labeller is None

    def label_frames(self, batch: torch.Tensor) -> torch.Tensor:
        """(batch, frames, 320) -> int64 (batch, frames): each frame's cluster in the codebook."""
        if self.labeller is None:
            raise MissingCodebookError(
                f"{self.config.name} was built without a codebook, so it has no targets to predict: fit one with "
                "`python -m pipeline.targets --shards SHARD_DIR` (a prep --preset waveform output) and build the "
                "model with codebook=<the folder it prints> (embed works without one)"
            )
        return self.labeller(batch)

    def draw_mask(self, batch_size: int, device: torch.device) -> torch.Tensor:
        """(batch, frames) bool, True = masked: fairseq's span rule (models/wave/span_masking.py)."""
        return span_mask(
            batch_size,
            self.config.crop_frames,
            start_probability=self.config.span_start_probability,
            span_frames=self.config.mask_span_frames,
            device=device,
        )

    def cluster_logits(self, frames: torch.Tensor) -> torch.Tensor:
        """(n, encoder_dim) context frames -> (n, clusters): cosine(final_proj(o), e_c) / temperature."""
        projected = F.normalize(self.final_proj(frames).float(), dim=-1)
        embeddings = F.normalize(self.label_embeddings.float(), dim=-1)
        return projected @ embeddings.T / self.config.logit_temperature

    def forward_loss(
        self, context: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, conv: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, logits of the masked frames): mean cross-entropy over masked frames + the feature penalty."""
        logits = self.cluster_logits(context[mask])  # (n_masked, clusters)
        loss = F.cross_entropy(logits, labels[mask])
        if self.config.feature_penalty_weight:
            loss = loss + self.config.feature_penalty_weight * conv.float().square().mean()
        return loss, logits

    def forward(self, batch: torch.Tensor) -> MaskedOutput:
        if batch.shape[1] != self.config.crop_frames:
            raise ValueError(
                f"{self.config.name} trains on crops of {self.config.crop_frames} frames, got "
                f"{batch.shape[1]}: build it with crop_frames={batch.shape[1]} or crop the input"
            )
        labels = self.label_frames(batch)  # raises first when there is no codebook: nothing to predict
        mask = self.draw_mask(batch.shape[0], batch.device)
        features, context = self.encoder(batch, mask, self.mask_embedding)
        loss, logits = self.forward_loss(context.last, labels, mask, features.conv)
        # unmasked frames are not predicted (pred_nomask_weight 0): zero rows; masked ones in time order,
        # as `context[mask]` took them (masked_scatter, not index assignment: it compiles)
        pred = logits.new_zeros(*mask.shape, self.n_clusters).masked_scatter(mask[..., None], logits.detach())
        scored = mask.float()
        return MaskedOutput(loss=loss, pred=pred, mask=scored, scored=scored)

    def embed(self, batch: torch.Tensor) -> torch.Tensor:
        """(batch, frames, 320) -> (batch, frames, encoder_dim), no masking; any number of frames.

        The layer is `config.embed_layer` (None: the encoder output, i.e. the last block's after the
        final LayerNorm of the pre-LN sizes; k: block k's output). The conv position embedding has no
        fixed length, so long inputs are encoded whole.
        """
        _, context = self.encoder(batch)
        return context.select(self.config.embed_layer)

    def no_weight_decay_names(self) -> set[str]:
        """The mask embedding and the position convolution's weight-norm magnitude."""
        return {"mask_embedding"} | {
            name for name, p in self.named_parameters() if p.requires_grad and name.endswith(WEIGHT_NORM_SCALE_SUFFIX)
        }

    def training_flops_per_sample(self) -> float:
        """Kaplan's 6 N per position: the convs on their output positions, projection and transformer on
        every frame, final_proj and the label embeddings on the (expected) masked frames only."""
        frames = self.config.crop_frames
        n_masked = self.spec.mask_ratio * frames
        flops = self.encoder.features.training_flops_per_sample(frames)
        flops += self.encoder.context.training_flops_per_sample(frames)
        head = count_parameters(self.final_proj) + self.label_embeddings.numel()
        return flops + 6.0 * head * n_masked

    def labelling_flops_per_sample(self) -> float:
        """Forward-only FLOPs of labelling one crop on the fly (not in `training_flops_per_sample`, the
        study's 6 N D of the model trained): a frozen teacher's layers for an iteration-2 codebook."""
        if self.labeller is None:
            return 0.0
        return self.labeller.flops_per_crop(self.config.crop_frames)


def _register() -> None:
    sizes = {
        "hubert-base": (hubert_base_config(), "95M (study Table IV; HuBERT Table I)"),
        "hubert-large": (hubert_large_config(), "317M (study Table IV; HuBERT Table I)"),
        "hubert-xlarge": (hubert_xlarge_config(), "964M (study Table IV; HuBERT Table I)"),
        "hubert-debug": (hubert_debug_config(), ""),
    }
    for name, (config, paper) in sizes.items():
        register_model(
            name,
            lambda _config=config, **overrides: HuBERT(apply_overrides(_config, overrides)),
            paper_parameters=paper,
        )


_register()
