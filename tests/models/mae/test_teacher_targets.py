"""The teacher-target objective (data2vec 2.0 / EAT on the study MAE): targets, EMA, losses, counts, FLOPs."""

from __future__ import annotations

import pytest
import torch

import models
from models import count_parameters
from models.layers.anti_collapse import variance_covariance_penalty
from models.mae.teacher_targets import TeacherTargetMAE
from tests.support.training_loop import assert_loss_fell, random_crops


def _model(**overrides) -> TeacherTargetMAE:
    torch.manual_seed(0)
    return models.build_model("t-mae-debug", **overrides)


def test_registered_for_every_study_size_and_debug():
    names = set(models.list_models())
    assert {"t-mae-debug", "t-mae-en768-12", "t-mae-en1536-24", "t-mae-en256-1"} <= names


def test_forward_backward_trains_the_student_never_the_teacher():
    model = _model()
    mel = torch.randn(4, model.spec.crop_frames, model.spec.n_mels)
    out = model(mel)
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    out.loss.backward()
    assert all(p.grad is None for p in model.teacher.parameters())
    assert all(p.grad is not None for p in model.encoder.blocks.parameters())
    assert model.decoder.head.out_features == model.config.encoder_dim  # predicts the teacher's width
    assert out.pred.shape == (4, model.spec.n_patches, model.config.encoder_dim)


def test_targets_average_the_instance_normalised_top_blocks():
    model = _model(teacher_top_blocks=1).eval()
    mel = torch.randn(3, model.spec.crop_frames, model.spec.n_mels)
    targets = model.teacher_targets(mel)
    assert targets.shape == (3, model.spec.n_patches, model.config.encoder_dim)
    # Each channel of each crop has mean 0 and unit variance over the crop's patches.
    assert torch.allclose(targets.mean(dim=1), torch.zeros(3, model.config.encoder_dim), atol=1e-5)
    assert torch.allclose(targets.var(dim=1, unbiased=False), torch.ones(3, model.config.encoder_dim), atol=1e-3)
    # With one block it is the last (normed) feature map of the teacher, instance-normalised.
    patches = model.patchify(model.teacher.normalize_mel(mel))
    last = model.teacher(patches).tokens
    expected = torch.nn.functional.instance_norm(last.transpose(1, 2)).transpose(1, 2)
    assert torch.allclose(targets, expected, atol=1e-5)


def test_the_teacher_is_an_annealed_moving_average_of_the_student():
    model = _model(teacher_decay_start=0.5, teacher_decay_end=0.9, teacher_anneal_steps=4)
    student = next(model.encoder.blocks.parameters())
    teacher = next(model.teacher.blocks.parameters())
    assert torch.equal(student, teacher)  # the teacher starts as the student
    decays = []
    for _ in range(6):
        before = teacher.detach().clone()
        with torch.no_grad():
            student.add_(0.1)  # an optimizer step
        decay = model.teacher_decay()
        model.after_optimizer_step()
        assert torch.allclose(teacher, decay * before + (1 - decay) * student, atol=1e-6)
        decays.append(decay)
    assert decays == pytest.approx([0.5, 0.6, 0.7, 0.8, 0.9, 0.9])  # linear, then held
    assert int(model.teacher_updates) == 6
    assert "teacher_updates" in model.state_dict()  # a resumed run continues the same schedule


def test_loss_falls_on_speech(speech_log_mel: dict):
    model = _model()
    mel = random_crops(speech_log_mel[model.spec.frontend_preset], model.spec.crop_frames, 8, seed=0)
    losses = []
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-3, weight_decay=0.0)
    for _ in range(40):
        loss = model(mel).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model.after_optimizer_step()
        losses.append(loss.item())
    assert_loss_fell(losses)


def test_parameter_count_is_the_mae_with_a_head_to_the_encoder_width():
    for name in ("mae-debug", "mae-en768-12"):
        mae, teacher = models.build_model(name), models.build_model(f"t-{name}")
        config = mae.config
        head_change = (config.decoder_dim + 1) * (config.encoder_dim - config.patch_values)
        assert count_parameters(teacher) - count_parameters(mae) == head_change


def test_flops_add_the_teachers_forward_over_every_patch():
    model, mae = _model(), models.build_model("mae-debug")
    teacher = sum(p.numel() for m in (model.teacher.patch_embed, model.teacher.blocks, model.teacher.norm)
                  for p in m.parameters())  # fmt: skip
    head = 6.0 * (model.decoder.head.weight.numel() - mae.decoder.head.weight.numel()
                  + model.decoder.head.bias.numel() - mae.decoder.head.bias.numel()) * model.spec.n_patches  # fmt: skip
    expected = mae.training_flops_per_sample() + head + 2.0 * teacher * model.spec.n_patches
    assert model.training_flops_per_sample() == pytest.approx(expected)


def test_the_probes_read_the_student():
    model = _model().eval()
    with torch.no_grad():
        for p in model.teacher.parameters():
            p.add_(1.0)
    mel = torch.randn(2, model.spec.crop_frames, model.spec.n_mels)
    mae = models.build_model("mae-debug")
    mae.encoder.load_state_dict(model.encoder.state_dict())
    assert torch.allclose(model.embed(mel), mae.eval().embed(mel), atol=1e-6)


def test_bad_teacher_settings_are_named():
    with pytest.raises(ValueError, match="teacher decay must satisfy"):
        _model(teacher_decay_start=0.99, teacher_decay_end=0.9)
    with pytest.raises(ValueError, match="teacher_top_blocks must be in"):
        _model(teacher_top_blocks=3)
    with pytest.raises(ValueError, match="uses the MAE decoder"):
        _model(decoder="cross")


def test_the_anti_collapse_penalty_is_vicregs_variance_and_covariance():
    # Unit-variance, uncorrelated columns: both terms ~0; a collapsed batch (one direction): large.
    spread = torch.randn(4096, 8, generator=torch.Generator().manual_seed(0))
    assert variance_covariance_penalty(spread).item() < 0.02
    collapsed = torch.randn(64, 1).expand(64, 8) * 0.01
    assert variance_covariance_penalty(collapsed).item() == pytest.approx(1.0 - (0.01**2 + 1e-4) ** 0.5, abs=0.02)
    model = models.build_model("mae-debug", pooled_vc_weight=2.0)
    plain = models.build_model("mae-debug")
    plain.load_state_dict(model.state_dict())
    mel = torch.randn(4, model.spec.crop_frames, model.spec.n_mels)
    torch.manual_seed(0)
    with_term = model(mel)
    torch.manual_seed(0)  # the same masks
    without = plain(mel)
    assert torch.equal(with_term.mask, without.mask)
    assert with_term.loss > without.loss  # the penalty is added on top of the same reconstruction
    with pytest.raises(ValueError, match="at least 2 vectors"):
        variance_covariance_penalty(torch.randn(1, 8))
