"""Factories of networks that miss the interface of rl_algos.custom_network, one mistake
each (tests/test_rl_custom_policy.py checks the error that names it)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from torch import nn


class NoForward(nn.Module):
    """A module whose author forgot forward()."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 2)


class ValueColumn(nn.Module):
    """Logits right, but the value as a (B, 1) column instead of (B,)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.policy = nn.Linear(n_in, n_out)
        self.value = nn.Linear(n_in, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.policy(obs), self.value(obs)


class Broken(nn.Module):
    """A forward that raises on any batch."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")


def _sizes(observation_space: gym.Space, action_space: Any) -> tuple[int, int]:
    n_out = int(action_space.n) if hasattr(action_space, "n") else action_space.shape[0]
    return int(observation_space.shape[0]), n_out


def no_forward(observation_space: gym.Space, action_space: gym.Space) -> nn.Module:
    return NoForward()


def value_column(observation_space: gym.Space, action_space: gym.Space) -> nn.Module:
    return ValueColumn(*_sizes(observation_space, action_space))


def broken(observation_space: gym.Space, action_space: gym.Space) -> nn.Module:
    return Broken()


def not_a_module(observation_space: gym.Space, action_space: gym.Space) -> Any:
    return {"weights": [1.0, 2.0]}


def no_log_std(observation_space: gym.Space, action_space: gym.Space) -> nn.Module:
    """Right for a Discrete space; for a Box, the Gaussian's log_std is missing."""
    n_in, n_out = _sizes(observation_space, action_space)
    return TwoOutputs(n_in, n_out)


class TwoOutputs(nn.Module):
    """(B, n_out) policy output and (B,) values, nothing else."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.policy = nn.Linear(n_in, n_out)
        self.value = nn.Linear(n_in, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.policy(obs), self.value(obs).squeeze(-1)
