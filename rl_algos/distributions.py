"""The action distributions a PPO policy samples from and is trained on: a categorical over
a Discrete action space (from logits) and a diagonal Gaussian over a Box (from a mean and a log
standard deviation, Schulman et al. (2017), "Proximal Policy Optimization Algorithms",
section 6.1). Sampling draws from the policy reactor's numpy generator, a fixed number of
draws per batch, so the stream never depends on the probabilities. And SAC's squashed
Gaussian (:func:`squashed_gaussian_sample`), sampled from noise its caller draws.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax of each row of (B, A) float32 logits (shifted by the row's maximum)."""
    z = logits - logits.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def sample_categorical(logp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One index per row of the (B, A) log-probabilities, drawn by inverse CDF with ``rng``
    (exactly B uniform draws, whatever the probabilities); returns (B,) int64."""
    p = np.exp(logp.astype(np.float64))
    cdf = np.cumsum(p, axis=1)
    u = rng.random(len(p))[:, None] * cdf[:, -1:]
    return np.minimum((u >= cdf).sum(axis=1), p.shape[1] - 1).astype(np.int64)


_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def gaussian_logp_entropy(
    mean: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-density of ``actions`` under N(mean, exp(log_std)^2) and the entropy of that
    distribution, each summed over the last dimension (independent action dimensions).

    ``mean``, ``actions``: (B, A) float32; ``log_std``: (1, A) or (B, A). Returns (B,) and (B,).
    """
    z = (actions - mean) * torch.exp(-log_std)
    logp = (-0.5 * z.square() - log_std - _LOG_SQRT_2PI).sum(-1)
    entropy = (0.5 + _LOG_SQRT_2PI + log_std).expand_as(mean).sum(-1)
    return logp, entropy


def sample_gaussian(
    mean: torch.Tensor, log_std: torch.Tensor, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Actions drawn from N(mean, exp(log_std)^2) with ``rng`` (B * A standard normal draws)
    and their log-probabilities: (B, A) float32 and (B,) float32."""
    noise = torch.from_numpy(rng.standard_normal(tuple(mean.shape)).astype(np.float32))
    actions = mean + torch.exp(log_std) * noise
    logp, _ = gaussian_logp_entropy(mean, log_std, actions)
    return actions.numpy(), logp.numpy()


def squashed_gaussian_sample(
    mean: torch.Tensor,
    log_std: torch.Tensor,
    noise: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised actions of SAC's policy and their log-probabilities: u = mean +
    exp(log_std) * noise, action = tanh(u) * scale + bias, so each action lies within
    [bias - scale, bias + scale] (a Box's bounds: scale = (high - low) / 2, bias =
    (high + low) / 2); log pi(action) = log N(u; mean, exp(log_std)^2) - log |d action / d u|,
    summed over the action's dimensions, with 1e-6 inside the logarithm of the Jacobian as in
    the paper's code. Source: Haarnoja et al. (2018), "Soft Actor-Critic Algorithms and
    Applications", arXiv:1812.05905, appendix C.

    ``mean``, ``log_std``, ``noise`` (standard normal): (B, A) float32; ``scale``, ``bias``:
    (A,) float32. Returns actions (B, A) float32 and log-probabilities (B,) float32; zero
    noise gives the mean action, tanh(mean) * scale + bias.
    """
    u = mean + log_std.exp() * noise
    y = torch.tanh(u)
    logp = -0.5 * noise.pow(2) - log_std - _LOG_SQRT_2PI
    logp = logp - torch.log(scale * (1 - y.pow(2)) + 1e-6)
    return y * scale + bias, logp.sum(-1)
