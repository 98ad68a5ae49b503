"""Custom networks for the library's learners: for PPO an actor-critic with a shared torso of
two LayerNorm'd tanh layers and two heads, the policy's and the value's (``make``); for DQN a
Q-network of the same torso (``make_q``); for SAC a policy (``make_sac_actor``) and a critic
(``make_sac_critic``), two-layer ReLU MLPs.

A learner builds one when its config names the factory,
``PPOConfig(network="custom_policy:make", network_kwargs={"hidden": 64})``,
``DQNConfig(network="custom_policy:make_q")`` or
``SACConfig(network="custom_policy:make_sac_actor",
critic_network="custom_policy:make_sac_critic")``, with this file in the folder the program
runs in (or on PYTHONPATH); see docs/custom-policies.md for the interface a factory and the
module it returns must meet.
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


#: The range the SAC policy's log standard deviation is kept in (as the built-in policy's).
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


def relu_mlp(n_in: int, hidden: int) -> nn.Sequential:
    """(B, n_in) -> (B, hidden): Linear -> ReLU, twice."""
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())


class GaussianPolicy(nn.Module):
    """(B, n_in) observations -> the (B, n_out) mean and log standard deviation of a Gaussian
    per action dimension, before SAC squashes its samples into the action space's bounds.
    The log standard deviation is kept in [LOG_STD_MIN, LOG_STD_MAX] by a sigmoid."""

    def __init__(self, n_in: int, n_out: int, hidden: int) -> None:
        super().__init__()
        self.torso = relu_mlp(n_in, hidden)
        self.mean = nn.Linear(hidden, n_out)
        self.spread = nn.Linear(hidden, n_out)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.torso(obs.flatten(1).float())
        unit = torch.sigmoid(self.spread(x))  # in (0, 1)
        return self.mean(x), LOG_STD_MIN + (LOG_STD_MAX - LOG_STD_MIN) * unit


class StateActionCritic(nn.Module):
    """(B, n_in) observations and (B, n_act) actions -> Q(s, a), (B,): an MLP on the two
    joined."""

    def __init__(self, n_in: int, n_act: int, hidden: int) -> None:
        super().__init__()
        self.body = relu_mlp(n_in + n_act, hidden)
        self.q = nn.Linear(hidden, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs.flatten(1).float(), action], dim=1)
        return self.q(self.body(x)).squeeze(-1)


def make_sac_actor(
    observation_space: gym.spaces.Box, action_space: gym.spaces.Box, hidden: int = 64
) -> GaussianPolicy:
    """SAC's policy for a Box action space: one Gaussian per element of the space."""
    n_in = int(np.prod(observation_space.shape))
    return GaussianPolicy(n_in, int(np.prod(action_space.shape)), hidden)


def make_sac_critic(
    observation_space: gym.spaces.Box, action_space: gym.spaces.Box, hidden: int = 64
) -> StateActionCritic:
    """One of SAC's two critics (the learner calls this twice)."""
    n_in = int(np.prod(observation_space.shape))
    return StateActionCritic(n_in, int(np.prod(action_space.shape)), hidden)
