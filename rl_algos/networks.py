"""Torch networks: MLP, the Nature-DQN CNN, an actor-critic and a Q-network; and weights as
numpy arrays, the form in which a learner broadcasts them to actor reactors over ports.

Sources: the CNN is that of Mnih et al. (2015), "Human-level control through deep
reinforcement learning", Nature 518 (3 conv layers 32x8x8/4, 64x4x4/2, 64x3x3/1, then 512
units). Orthogonal initialisation with gain sqrt(2) for hidden layers, 0.01 for the policy
head and 1 for the value head follows Andrychowicz et al. (2021), "What matters in on-policy
RL? A large-scale empirical study", ICLR.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
from torch import nn

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def layer_init(
    layer: nn.Linear | nn.Conv2d, gain: float = math.sqrt(2), bias: float = 0.0
) -> nn.Module:
    """Orthogonal weights scaled by ``gain`` and a constant bias; returns ``layer``."""
    nn.init.orthogonal_(layer.weight, gain)
    if layer.bias is not None:
        nn.init.constant_(layer.bias, bias)
    return layer


def mlp(
    n_in: int,
    n_out: int,
    hidden: Sequence[int] = (64, 64),
    activation: str = "tanh",
    out_gain: float = 1.0,
) -> nn.Sequential:
    """A fully connected network (B, n_in) float32 -> (B, n_out) float32 with ``activation``
    (``"tanh"`` or ``"relu"``; KeyError otherwise) between layers and a linear output layer
    initialised with ``out_gain``."""
    layers, width = [], n_in
    for h in hidden:
        layers += [layer_init(nn.Linear(width, h)), _ACTIVATIONS[activation]()]
        width = h
    layers.append(layer_init(nn.Linear(width, n_out), gain=out_gain))
    return nn.Sequential(*layers)


class NatureCNN(nn.Module):
    """The Nature-DQN torso: (B, C, 84, 84) uint8 frames -> (B, 512) float32 features.

    Frames are scaled to [0, 1] inside the network, so batches travel as uint8.
    """

    def __init__(self, in_channels: int = 4) -> None:
        super().__init__()
        self.net = nn.Sequential(
            layer_init(nn.Conv2d(in_channels, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.float() / 255.0)


class ActorCritic(nn.Module):
    """Separate policy and value networks for a discrete action space (PPO).

    ``forward(obs)`` takes (B, *obs_shape) and returns ``(logits (B, n_actions), value (B,))``,
    both float32. Vector observations get two MLPs; image observations share a NatureCNN.
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_actions: int,
        hidden: Sequence[int] = (64, 64),
        activation: str = "tanh",
    ) -> None:
        super().__init__()
        self.spec = dict(
            obs_shape=tuple(obs_shape),
            n_actions=int(n_actions),
            hidden=tuple(hidden),
            activation=activation,
        )
        if len(obs_shape) == 3:
            self.torso: nn.Module = NatureCNN(obs_shape[0])
            self.actor = layer_init(nn.Linear(512, n_actions), gain=0.01)
            self.critic = layer_init(nn.Linear(512, 1), gain=1.0)
        else:
            n_in = int(np.prod(obs_shape))
            self.torso = nn.Flatten()
            self.actor = mlp(n_in, n_actions, hidden, activation, out_gain=0.01)
            self.critic = mlp(n_in, 1, hidden, activation, out_gain=1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.torso(obs)
        return self.actor(x), self.critic(x).squeeze(-1)


class QNetwork(nn.Module):
    """Action values for a discrete action space (DQN): (B, *obs_shape) -> (B, n_actions)
    float32. MLP for vector observations, NatureCNN + 512-unit head for frames."""

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_actions: int,
        hidden: Sequence[int] = (120, 84),
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.spec = dict(
            obs_shape=tuple(obs_shape),
            n_actions=int(n_actions),
            hidden=tuple(hidden),
            activation=activation,
        )
        if len(obs_shape) == 3:
            self.net = nn.Sequential(NatureCNN(obs_shape[0]), nn.Linear(512, n_actions))
        else:
            n_in = int(np.prod(obs_shape))
            self.net = nn.Sequential(nn.Flatten(), mlp(n_in, n_actions, hidden, activation))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


KINDS = {"actor_critic": ActorCritic, "q": QNetwork}


@dataclass(frozen=True)
class Weights:
    """A network as plain data, what a learner sends to actors over a port.

    ``kind`` is a key of :data:`KINDS`, ``spec`` the constructor's keyword arguments,
    ``state`` the state dict as CPU numpy arrays (copies, never views of live parameters),
    ``version`` the number of updates the learner had made.
    """

    kind: str
    spec: dict
    state: dict
    version: int = 0


def export_weights(net: nn.Module, kind: str, version: int = 0) -> Weights:
    """Snapshot ``net`` (any device) as :class:`Weights` with numpy copies of its state."""
    state = {k: v.detach().to("cpu", copy=True).numpy() for k, v in net.state_dict().items()}
    spec = cast(dict, net.spec)  # set by ActorCritic and QNetwork
    return Weights(kind, dict(spec), state, version)


def load_weights(w: Weights, net: nn.Module | None = None) -> nn.Module:
    """Copy ``w`` into ``net`` (built from ``w.spec`` when None) and return it. Raises
    KeyError for an unknown kind and RuntimeError when shapes do not match ``net``."""
    if net is None:
        net = KINDS[w.kind](**w.spec)
    net.load_state_dict({k: torch.from_numpy(v) for k, v in w.state.items()})
    return net
