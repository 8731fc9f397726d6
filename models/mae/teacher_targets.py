"""The teacher-target objective on the study MAE: data2vec 2.0 / EAT scaled down, `<mae name>` -> `t-<mae name>`.

The student is the study MAE's encoder on the masked crop, as for the MAE; its decoder regresses,
at every removed patch, the *teacher's* representation of that patch instead of its log-mel. The
teacher is an exponential moving average of the student's encoder that sees the whole crop:
- target (data2vec 2.0, Baevski et al. 2023, Sec. 2; EAT, Chen et al. 2024, Sec. 3.2): the average
  of the teacher's top `teacher_top_blocks` block outputs, each instance-normalised over the
  crop's tokens (data2vec's `instance_norm_target_layer`), without the final LayerNorm;
- frame loss: mean squared error at the removed patches (the decoder's `scored` patches);
- utterance loss (EAT Sec. 3.2, Eq. 4): mean squared error between the student's pooled visible
  tokens and the target averaged over the crop: the time-averaged vector the probes read is
  itself trained, weight `utterance_loss_weight` (EAT: 1);
- teacher decay: annealed linearly from `teacher_decay_start` to `teacher_decay_end` over
  `teacher_anneal_steps` updates, then held. data2vec 2.0 anneals 0.999 -> 0.99999 over 400k
  updates: a teacher time constant 1/(1 - decay) of 0.25% -> 25% of training. Re-derived for the
  CPU default's 300 steps with the same end fraction: 0.99 (100 steps, a third of the run), from
  0.9 (10 steps): a teacher that follows the student closely while the student changes fastest.
The teacher is a buffer-like submodule (no gradients, not in the optimizer) saved with the
checkpoint, so a resumed run continues the same average; `embed` reads the student, as the probes
of every family do.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch
from torch import nn

from models.config_overrides import apply_overrides
from models.interface import MaskedOutput
from models.mae.config import MaskedAutoencoderConfig
from models.mae.masked_autoencoder import MaskedAutoencoder
from models.mae.study_mae import STUDY_TABLE_TOTAL_M, debug_mae_config, study_mae_config
from models.registry import register_model

TEACHER_PREFIX = "t-"  # `t-mae-debug`: the teacher-target objective on mae-debug's encoder


class TeacherTargetMAE(MaskedAutoencoder):
    def __init__(self, config: MaskedAutoencoderConfig) -> None:
        if config.decoder != "mae":
            raise ValueError(
                f"{config.name}: the teacher-target objective uses the MAE decoder, not {config.decoder!r}"
            )
        super().__init__(config)
        # The decoder predicts the teacher's width, not log-mel patch values.
        self.decoder.head = nn.Linear(config.decoder_dim, config.encoder_dim)
        nn.init.xavier_uniform_(self.decoder.head.weight)
        nn.init.zeros_(self.decoder.head.bias)
        self.teacher = copy.deepcopy(self.encoder).requires_grad_(False)
        self.register_buffer("teacher_updates", torch.zeros((), dtype=torch.long))

    def teacher_decay(self) -> float:
        config = self.config
        progress = min(1.0, float(self.teacher_updates) / config.teacher_anneal_steps)
        return config.teacher_decay_start + progress * (config.teacher_decay_end - config.teacher_decay_start)

    @torch.no_grad()
    def after_optimizer_step(self) -> None:
        """teacher <- decay x teacher + (1 - decay) x student, parameters and buffers (the input
        BatchNorm's running statistics) alike."""
        decay = self.teacher_decay()
        for teacher, student in zip(self.teacher.parameters(), self.encoder.parameters(), strict=True):
            teacher.mul_(decay).add_(student.detach(), alpha=1.0 - decay)
        for teacher, student in zip(self.teacher.buffers(), self.encoder.buffers(), strict=True):
            if teacher.is_floating_point():
                teacher.mul_(decay).add_(student, alpha=1.0 - decay)
            else:  # BatchNorm's batch counter
                teacher.copy_(student)
        self.teacher_updates += 1

    @torch.no_grad()
    def teacher_targets(self, mel: torch.Tensor) -> torch.Tensor:
        """(batch, n_patches, encoder_dim): the average of the teacher's top blocks, each
        instance-normalised over the patches of its crop."""
        self.teacher.eval()  # its input BatchNorm uses its running statistics, never updates them
        patches = self.patchify(self.teacher.normalize_mel(mel))
        maps = self.teacher(patches, keep_feature_maps=True).feature_maps
        top = self.config.teacher_top_blocks or self.config.encoder_depth
        # maps[k] is block k's output (the last one after the final LayerNorm, which instance
        # normalisation over tokens follows either way).
        blocks = maps[len(maps) - top :]
        normed = [nn.functional.instance_norm(b.transpose(1, 2).float()).transpose(1, 2) for b in blocks]
        return torch.stack(normed).mean(dim=0)[:, self.teacher.n_prefix :]

    def forward(self, mel: torch.Tensor) -> MaskedOutput:
        targets = self.teacher_targets(mel)  # (batch, n_patches, encoder_dim)
        patches = self.patchify(self.encoder.normalize_mel(mel))
        encoded, masking = self.forward_encoder(patches, self.spec.mask_ratio)
        decoded = self.forward_decoder(encoded, masking)
        per_patch = ((decoded.pred.float() - targets) ** 2).mean(dim=-1)
        frame_loss = (per_patch * decoded.scored).sum() / decoded.scored.sum()
        pooled = encoded.patch_tokens.float().mean(dim=1)
        utterance_loss = ((pooled - targets.mean(dim=1)) ** 2).mean()
        loss = frame_loss + self.config.utterance_loss_weight * utterance_loss + self.anti_collapse_loss(encoded)
        return MaskedOutput(loss=loss, pred=decoded.pred, mask=masking.mask, scored=decoded.scored)

    def training_flops_per_sample(self) -> float:
        """The MAE's count plus the teacher's forward pass over every patch (2 N per token, Kaplan)."""
        teacher = sum(p.numel() for module in (self.teacher.patch_embed, self.teacher.blocks, self.teacher.norm)
                      for p in module.parameters())  # fmt: skip
        return super().training_flops_per_sample() + 2.0 * teacher * self.config.n_patches


def _register() -> None:
    """`t-mae-en<width>-<depth>` for every size of the study's Table I, and `t-mae-debug`: the same
    encoders (the same parameter count: the teacher is not trained), the teacher-target objective."""
    configs = [study_mae_config(f"mae-en{w}-{d}", w, d) for w, d in STUDY_TABLE_TOTAL_M] + [debug_mae_config()]
    for config in configs:
        teacher_config = replace(config, name=f"{TEACHER_PREFIX}{config.name}")
        register_model(
            teacher_config.name,
            lambda _config=teacher_config, **overrides: TeacherTargetMAE(apply_overrides(_config, overrides)),
        )


_register()
