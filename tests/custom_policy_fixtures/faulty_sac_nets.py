"""Factories of SAC networks that miss the interface of rl_algos.custom_network's roles
"sac_actor" and "sac_critic", one mistake each (tests/test_rl_custom_policy.py checks the
error that names it)."""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn


class MeanOnly(nn.Module):
    """A SAC policy that returns the Gaussian's mean and forgets its log_std."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.mean = nn.Linear(n_in, n_out)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.mean(obs)


class DoubleLogStd(MeanOnly):
    """A SAC policy whose log_std comes out as float64."""

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        mean = self.mean(obs)
        return mean, torch.zeros_like(mean, dtype=torch.float64)


class QColumn(nn.Module):
    """A critic whose Q(s, a) is a (B, 1) column instead of (B,)."""

    def __init__(self, n_in: int, n_act: int) -> None:
        super().__init__()
        self.q = nn.Linear(n_in + n_act, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.q(torch.cat([obs, action], dim=1))


class StateOnly(QColumn):
    """A critic whose forward takes no action: V(s), not Q(s, a)."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.q(obs).squeeze(-1)


def _sizes(observation_space: gym.spaces.Box, action_space: gym.spaces.Box) -> tuple[int, int]:
    return int(observation_space.shape[0]), int(action_space.shape[0])


def mean_only(observation_space: gym.spaces.Box, action_space: gym.spaces.Box) -> nn.Module:
    return MeanOnly(*_sizes(observation_space, action_space))


def double_log_std(observation_space: gym.spaces.Box, action_space: gym.spaces.Box) -> nn.Module:
    return DoubleLogStd(*_sizes(observation_space, action_space))


def q_column(observation_space: gym.spaces.Box, action_space: gym.spaces.Box) -> nn.Module:
    return QColumn(*_sizes(observation_space, action_space))


def state_only(observation_space: gym.spaces.Box, action_space: gym.spaces.Box) -> nn.Module:
    return StateOnly(*_sizes(observation_space, action_space))
