"""Agent attention: agent pooling, the formula, and invariance to appended padding."""

from __future__ import annotations

import torch

from models.heads.agent_attention import AgentAttention, pool_agent_tokens


def test_agent_count_is_floor_of_frames_over_two_to_the_p():
    for num_frames, pool_steps, expected_agents in ((100, 4, 6), (64, 4, 4), (37, 2, 9), (5, 3, 1)):
        query = torch.randn(1, 1, num_frames, 4)
        valid_frames = torch.ones(1, num_frames, dtype=torch.bool)
        _, valid_agents = pool_agent_tokens(query, valid_frames, pool_steps)
        assert int(valid_agents.sum()) == expected_agents, (num_frames, pool_steps)


def test_agents_equal_p_pairwise_average_pooling_steps():
    query = torch.randn(2, 3, 70, 4)
    valid_frames = torch.ones(2, 70, dtype=torch.bool)
    agents, valid_agents = pool_agent_tokens(query, valid_frames, pool_steps=3)

    pooled = query.reshape(6, 70, 4).transpose(1, 2)  # (batch * heads, dim, frames)
    for _ in range(3):
        pooled = torch.nn.functional.avg_pool1d(pooled, kernel_size=2, stride=2)
    expected = pooled.transpose(1, 2).reshape(2, 3, -1, 4)  # floor(70 / 8) = 8 agents
    num_agents = expected.shape[2]
    assert int(valid_agents[0].sum()) == num_agents == 8
    torch.testing.assert_close(agents[:, :, :num_agents], expected)


def test_agent_attention_matches_its_formula_plus_depthwise_conv():
    torch.manual_seed(0)
    heads, head_dim, num_frames, pool_steps = 2, 4, 32, 2
    attention = AgentAttention(heads, head_dim, pool_steps=pool_steps)
    query, key, value = (torch.randn(1, heads, num_frames, head_dim) for _ in range(3))
    output = attention(query, key, value)

    agents = query.reshape(1, heads, num_frames // 4, 4, head_dim).mean(dim=3)  # (1, h, n, d)
    scale = head_dim**-0.5
    agent_values = torch.softmax(agents @ key.transpose(-2, -1) * scale, dim=-1) @ value
    mixed = torch.softmax(query @ agents.transpose(-2, -1) * scale, dim=-1) @ agent_values
    channels_first = value.transpose(1, 2).reshape(1, num_frames, heads * head_dim).transpose(1, 2)
    local = torch.nn.functional.conv1d(
        channels_first, attention.value_conv.weight, attention.value_conv.bias, padding=1, groups=heads * head_dim
    )
    local = local.transpose(1, 2).reshape(1, num_frames, heads, head_dim).transpose(1, 2)
    torch.testing.assert_close(output, mixed + local)


def test_agent_attention_real_frames_unchanged_by_appended_padding():
    torch.manual_seed(1)
    attention = AgentAttention(heads=2, head_dim=4, pool_steps=4)
    lengths = (40, 23, 9)  # 2 agents, 1 agent, 1 agent from fewer frames than a block
    for real_frames in lengths:
        query, key, value = (torch.randn(1, 2, real_frames, 4) for _ in range(3))
        unpadded = attention(query, key, value)
        for extra in (1, 7, 30):
            padded = [torch.cat([x, 100 * torch.randn(1, 2, extra, 4)], dim=2) for x in (query, key, value)]
            valid_frames = torch.arange(real_frames + extra)[None, :] < real_frames
            with_padding = attention(*padded, valid_frames)
            torch.testing.assert_close(with_padding[:, :, :real_frames], unpadded, rtol=1e-5, atol=1e-5)
