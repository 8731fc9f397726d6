"""Language-ID head: self-attention path, statistics pooling, padding invariance, training."""

from __future__ import annotations

import pytest
import torch

from models.heads.attentive_pooling import (
    AttentiveStatisticsPooling,
    valid_frames_from_lengths,
)
from models.heads.frame_attention import MultiHeadFrameAttention, SoftmaxAttention
from models.heads.lid_head import LanguageIdHead

ATTENTIONS = ("self", "performer", "agent")


@pytest.fixture()
def single_thread():
    """Tiny models step faster on one thread than on threads fighting over shared cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_self_attention_path_equals_hand_written_softmax_attention():
    torch.manual_seed(0)
    dim, heads, num_frames = 16, 4, 9
    attention = MultiHeadFrameAttention(dim, heads, SoftmaxAttention())
    frames = torch.randn(2, num_frames, dim)
    valid_frames = valid_frames_from_lengths(torch.tensor([9, 6]), num_frames)
    output = attention(frames, valid_frames)

    head_dim = dim // heads
    query, key, value = (frames @ attention.qkv.weight.T + attention.qkv.bias).split(dim, dim=-1)
    expected = torch.empty_like(frames)
    for b in range(2):
        for h in range(heads):
            cols = slice(h * head_dim, (h + 1) * head_dim)
            scores = query[b, :, cols] @ key[b, :, cols].T / head_dim**0.5  # (frames, frames)
            scores[:, ~valid_frames[b]] = float("-inf")
            expected[b, :, cols] = torch.softmax(scores, dim=-1) @ value[b, :, cols]
    expected = expected @ attention.out.weight.T + attention.out.bias
    torch.testing.assert_close(output, expected)


def test_statistics_pooling_with_flat_scores_is_masked_mean_and_std():
    pooling = AttentiveStatisticsPooling(dim=3, bottleneck_dim=4)
    torch.nn.init.zeros_(pooling.score_out.weight)  # equal scores -> uniform weights over real frames
    frames = torch.tensor([[[1.0, 2.0, 0.0], [3.0, 2.0, 4.0], [5.0, 2.0, 8.0], [99.0, 99.0, 99.0]]])
    pooled = pooling(frames, torch.tensor([[True, True, True, False]]))
    mean = torch.tensor([3.0, 2.0, 4.0])
    population_std = torch.tensor([(8 / 3) ** 0.5, 1e-3, (32 / 3) ** 0.5])  # clamp floor: sqrt(1e-6)
    torch.testing.assert_close(pooled[0], torch.cat([mean, population_std]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_head_logits_unchanged_when_padding_is_appended(attention):
    torch.manual_seed(2)
    head = LanguageIdHead(24, 5, attention=attention).eval()
    clips = [torch.randn(real_frames, 24) for real_frames in (50, 33, 12)]
    alone = torch.cat([head(clip.unsqueeze(0)) for clip in clips])  # (3, 5), no padding at all

    num_frames = 80
    batch = torch.full((3, num_frames, 24), float("nan"))  # padding that would poison any leak
    for index, clip in enumerate(clips):
        batch[index, : len(clip)] = clip
    valid_frames = valid_frames_from_lengths(torch.tensor([len(c) for c in clips]), num_frames)
    batched = head(batch, valid_frames)
    torch.testing.assert_close(batched, alone, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_head_trains_to_separate_two_synthetic_classes(attention, single_thread):
    torch.manual_seed(0)
    dim, num_frames = 12, 32

    def make_clips(count: int) -> tuple[torch.Tensor, torch.Tensor]:
        # Same mean everywhere; class 1 has a louder 4-frame burst in feature 0 somewhere in the clip,
        # so a head must find the frames that matter rather than average them.
        labels = torch.arange(count) % 2
        frames = torch.randn(count, num_frames, dim)
        starts = torch.randint(0, num_frames - 4, (count,))
        for index in torch.nonzero(labels).flatten():
            start = int(starts[index])
            frames[index, start : start + 4, 0] += 4.0
        return frames, labels

    train_frames, train_labels = make_clips(256)
    test_frames, test_labels = make_clips(128)
    head = LanguageIdHead(dim, 2, attention=attention, performer_redraw=attention == "performer")
    optimizer = torch.optim.Adam(head.parameters(), lr=3e-3)
    for step in range(60):
        batch = torch.arange(step * 64, step * 64 + 64) % 256
        loss = torch.nn.functional.cross_entropy(head(train_frames[batch]), train_labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    head.eval()
    with torch.no_grad():
        accuracy = (head(test_frames).argmax(dim=1) == test_labels).float().mean().item()
    assert accuracy >= 0.9, f"{attention}: held-out accuracy {accuracy:.2f}"


def test_head_rejects_masks_it_cannot_honour():
    head = LanguageIdHead(8, 3)
    frames = torch.randn(2, 6, 8)
    with pytest.raises(ValueError, match="pad at the end"):
        head(frames, torch.tensor([[False, True, True, True, True, True]] * 2))
    with pytest.raises(ValueError, match="no real frame"):
        head(frames, torch.tensor([[True] * 6, [False] * 6]))
    with pytest.raises(ValueError, match="Unknown attention"):
        LanguageIdHead(8, 3, attention="linear")


def test_defaults_follow_the_papers_lid_setting():
    # models.md: 4 heads, attention dim 64, dropout 0.2; Performer best at r=128, agent at p=4.
    performer_head = LanguageIdHead(32, 7, attention="performer")
    agent_head = LanguageIdHead(32, 7, attention="agent")
    assert performer_head.attention.heads == 4
    assert performer_head.attention.qkv.in_features == 64
    assert performer_head.dropout.p == 0.2
    assert performer_head.attention.kernel.projection.shape == (128, 16)  # r features x head dim 64/4
    assert agent_head.attention.kernel.pool_steps == 4
    assert performer_head(torch.randn(2, 40, 32)).shape == (2, 7)
