"""Custom networks for the library's learners: for PPO an actor-critic with a shared torso of
two LayerNorm'd tanh layers and two heads, the policy's and the value's (``make``); for DQN a
Q-network of the same torso (``make_q``).

A learner builds one when its config names the factory,
``PPOConfig(network="custom_policy:make", network_kwargs={"hidden": 64})`` or
``DQNConfig(network="custom_policy:make_q")``, with this file in the folder the program runs
in (or on PYTHONPATH); see docs/custom-policies.md for the interface a factory and the module
it returns must meet.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn


def torso(n_in: int, hidden: int) -> nn.Sequential:
    """(B, n_in) -> (B, hidden): Linear -> LayerNorm -> tanh, twice."""
    return nn.Sequential(
        nn.Linear(n_in, hidden),
        nn.LayerNorm(hidden),
        nn.Tanh(),
        nn.Linear(hidden, hidden),
        nn.LayerNorm(hidden),
        nn.Tanh(),
    )


class TwoHeadedMLP(nn.Module):
    """(B, n_in) observations -> (B, n_out) logits or Gaussian means, and (B,) values.

    The torso is :func:`torso`; the policy head starts near zero
    (orthogonal, gain 0.01), so the first policy is close to uniform. For continuous actions
    ``log_std`` is a learned (1, n_out) parameter, 0 at the start.
    """

    def __init__(self, n_in: int, n_out: int, hidden: int, continuous: bool) -> None:
        super().__init__()
        self.torso = torso(n_in, hidden)
        self.policy = nn.Linear(hidden, n_out)
        self.value = nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.policy.weight, gain=0.01)
        nn.init.zeros_(self.policy.bias)
        if continuous:
            self.log_std = nn.Parameter(torch.zeros(1, n_out))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.torso(obs.flatten(1).float())
        return self.policy(x), self.value(x).squeeze(-1)


def make(
    observation_space: gym.spaces.Box, action_space: gym.Space, hidden: int = 64
) -> TwoHeadedMLP:
    """The network for the environment's spaces: as many outputs as a Discrete space has
    actions, or as a Box has elements (then a Gaussian policy)."""
    n_in = int(np.prod(observation_space.shape))
    if isinstance(action_space, gym.spaces.Discrete):
        return TwoHeadedMLP(n_in, int(action_space.n), hidden, continuous=False)
    return TwoHeadedMLP(n_in, int(np.prod(action_space.shape)), hidden, continuous=True)


def make_q(
    observation_space: gym.spaces.Box, action_space: gym.spaces.Discrete, hidden: int = 64
) -> nn.Module:
    """A Q-network for DQN: (B, n_in) observations -> (B, n_actions) action values."""
    n_in = int(np.prod(observation_space.shape))
    return nn.Sequential(nn.Flatten(), torso(n_in, hidden), nn.Linear(hidden, int(action_space.n)))
