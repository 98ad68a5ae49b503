"""A user's torch module as SAC's policy: the network of role ``"sac_actor"``
(:mod:`rl_algos.custom_network`) with the squashed sampling of the built-in
:class:`rl_algos.networks.SquashedGaussianActor` around it.

The module gives the mean and the log standard deviation of a Gaussian per action dimension;
:class:`CustomSACActor` squashes and scales samples into the action space's bounds with the
same function as the built-in policy (:func:`rl_algos.distributions.squashed_gaussian_sample`)
and offers the same small interface (:class:`rl_algos.sac.SquashedPolicy`):
``action_bounds()`` and ``sample(obs, noise)``. So the policy reactor
(:class:`rl_algos.sac.SACActor`), the learner and ``lf-rl eval`` treat both alike. SAC's
critics need nothing beyond ``forward(obs, action)``: they are plain
:class:`rl_algos.custom_network.CustomNetwork` objects of role ``"sac_critic"``.
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch

from .config import ConfigError
from .custom_network import CustomNetwork, custom_network, space_of
from .distributions import squashed_gaussian_sample


class CustomSACActor(CustomNetwork):
    """The user's SAC policy built by ``factory`` (see :class:`CustomNetwork` for the
    arguments; ``role`` must be ``"sac_actor"``), with the action space's ``scale``
    ((high - low) / 2) and ``bias`` ((high + low) / 2) as (A,) float32 buffers that follow
    the network to its device but stay out of its state dict (they come from ``spec``).

    Raises:
        ConfigError: see :class:`CustomNetwork`; also another role or a space other than a
            Box.
    """

    scale: torch.Tensor
    bias: torch.Tensor

    def __init__(
        self,
        factory: str,
        kwargs: dict[str, Any],
        observation_space: dict[str, Any],
        action_space: dict[str, Any],
        role: str = "sac_actor",
        *,
        generator: torch.Generator,
    ) -> None:
        if role != "sac_actor" or action_space.get("type") != "Box":
            raise ConfigError(
                f"network {factory}: a SAC policy has role 'sac_actor' and a Box action "
                f"space, not {role!r} and {action_space.get('type')}"
            )
        super().__init__(
            factory, kwargs, observation_space, action_space, role, generator=generator
        )
        space = cast(gym.spaces.Box, space_of(action_space))
        low, high = (b.reshape(-1).astype(np.float32) for b in (space.low, space.high))
        self.bounds = (low, high)
        self.register_buffer("scale", torch.from_numpy((high - low) / 2), persistent=False)
        self.register_buffer("bias", torch.from_numpy((high + low) / 2), persistent=False)

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The action space's bounds ``low`` and ``high``, each (A,) float32."""
        return self.bounds

    def sample(self, obs: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised actions (B, A) float32 within the bounds for (B, *obs_shape)
        observations and standard normal ``noise`` (B, A) float32, and their
        log-probabilities (B,) float32 under the squashed Gaussian."""
        mean, log_std = self(obs)
        return squashed_gaussian_sample(mean, log_std, noise, self.scale, self.bias)


def custom_sac_actor(
    factory: str,
    kwargs: dict[str, Any],
    spaces: tuple[gym.Space, gym.Space],
    generator: torch.Generator,
) -> CustomSACActor:
    """A :class:`CustomSACActor` for gymnasium ``spaces`` (observation, action).

    Raises:
        ConfigError: see :func:`rl_algos.custom_network.custom_network` (a Box action
            space is needed).
    """
    net = custom_network(factory, kwargs, spaces, "sac_actor", generator, CustomSACActor)
    assert isinstance(net, CustomSACActor)
    return net
