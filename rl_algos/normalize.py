"""Observation and reward normalisation by running statistics, for a bank of environments.

Observations are shifted and scaled by the running mean and variance of every observation seen
so far, then clipped: ``clip((obs - mean) / sqrt(var + eps), -clip, clip)``. Rewards are divided
by the running standard deviation of the discounted return of each environment (the return is
reset when an episode ends), then clipped; their mean is not removed, so the sign of a reward
stays. These are the rules of gymnasium's ``NormalizeObservation``/``NormalizeReward`` and of
Stable-Baselines3's ``VecNormalize``, with one set of statistics shared by all the environments
of a bank (as ``VecNormalize``), so that a policy sees the same scaling whatever environment
an observation comes from.

Running moments: Chan, Golub, LeVeque (1979), "Updating formulae and a pairwise algorithm for
computing sample variances": merging a batch of n values (mean m_b, variance v_b) into n_a
values (m_a, v_a) gives mean m_a + d n/N and M2 = v_a n_a + v_b n + d^2 n_a n / N, with d =
m_b - m_a and N = n_a + n.

Everything here is plain data that pickles (a reactor snapshot keeps it); :class:`ObsStats` is
what a learner saves with its model so that an evaluation applies the same scaling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .envs import EnvStep

#: The count the statistics start with, so that the first update does not divide by zero.
PRIOR_COUNT = 1e-4


@dataclass
class RunningMeanStd:
    """Running mean and (population) variance of values of shape ``shape``, float64.

    Starts at mean 0, variance 1 with a weight of :data:`PRIOR_COUNT` values.
    """

    shape: tuple[int, ...] = ()
    mean: np.ndarray = field(init=False)
    var: np.ndarray = field(init=False)
    count: float = PRIOR_COUNT

    def __post_init__(self) -> None:
        self.mean = np.zeros(self.shape, np.float64)
        self.var = np.ones(self.shape, np.float64)

    def update(self, batch: np.ndarray) -> None:
        """Merge ``batch`` (n, *shape) into the statistics (n >= 1; nothing for n = 0)."""
        n = len(batch)
        if n == 0:
            return
        batch = np.asarray(batch, np.float64)
        b_mean, b_var = batch.mean(axis=0), batch.var(axis=0)
        total = self.count + n
        delta = b_mean - self.mean
        m2 = self.var * self.count + b_var * n + delta**2 * self.count * n / total
        self.mean = self.mean + delta * n / total
        self.var = m2 / total
        self.count = total


@dataclass(frozen=True)
class ObsStats:
    """The observation scaling of a run: ``mean`` and ``var`` (float64, the observation's
    shape), the number of observations ``count`` they summarise, ``clip`` and ``epsilon``."""

    mean: np.ndarray
    var: np.ndarray
    count: float
    clip: float = 10.0
    epsilon: float = 1e-8

    def apply(self, obs: np.ndarray) -> np.ndarray:
        """``obs`` (..., *shape) scaled and clipped, as float32 of the same shape."""
        scaled = (obs - self.mean) / np.sqrt(self.var + self.epsilon)
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)

    def to_dict(self) -> dict[str, Any]:
        """A form that ``torch.load(..., weights_only=True)`` reads back: lists and floats."""
        return {
            "mean": self.mean.tolist(),
            "var": self.var.tolist(),
            "count": float(self.count),
            "clip": float(self.clip),
            "epsilon": float(self.epsilon),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ObsStats:
        """The inverse of :meth:`to_dict` (KeyError for a missing entry)."""
        return cls(
            np.asarray(d["mean"], np.float64),
            np.asarray(d["var"], np.float64),
            float(d["count"]),
            float(d["clip"]),
            float(d["epsilon"]),
        )


class StepNormalizer:
    """Normalises the :class:`rl_algos.envs.EnvStep` of a bank of environment groups.

    ``obs``/``reward``: which parts to normalise; ``gamma``: the discount of the return whose
    spread scales the rewards (the learner's); ``clip_obs``, ``clip_reward``: bounds after
    scaling; ``epsilon``: added to variances. Call it once per tag with the steps of every
    group, in bank order.
    """

    def __init__(
        self,
        obs: bool = True,
        reward: bool = True,
        gamma: float = 0.99,
        clip_obs: float = 10.0,
        clip_reward: float = 10.0,
        epsilon: float = 1e-8,
    ) -> None:
        self.obs, self.reward, self.gamma = obs, reward, gamma
        self.clip_obs, self.clip_reward, self.epsilon = clip_obs, clip_reward, epsilon
        self.obs_rms: RunningMeanStd | None = None
        self.ret_rms = RunningMeanStd()
        self.returns = np.zeros(0, np.float64)  # discounted return of each environment

    def __call__(self, steps: Sequence[EnvStep]) -> list[EnvStep]:
        """The normalised steps, one per group, in the order given. Observations (``obs``
        and ``final_obs``) become float32; the statistics are first updated with ``obs``
        (the observations the environments are in now; a finished episode's last
        observation is scaled, not counted). A reset report (``steps == 0``) leaves the
        reward statistics alone. Episodes keep their raw returns."""
        obs = np.concatenate([s.obs for s in steps])
        if self.obs:
            if self.obs_rms is None:
                self.obs_rms = RunningMeanStd(obs.shape[1:])
            self.obs_rms.update(obs)
        rewards = np.concatenate([s.reward for s in steps]).astype(np.float64)
        done = np.concatenate([s.done for s in steps])
        if self.reward and all(s.steps > 0 for s in steps):
            rewards = self._scale_rewards(rewards, done)
        stats, out, base = self.obs_stats(), [], 0
        for s in steps:
            part = slice(base, base + len(s.obs))
            out.append(_normalised(s, stats, rewards[part].astype(np.float32)))
            base += len(s.obs)
        return out

    def obs_stats(self) -> ObsStats | None:
        """The observation scaling now (copies), None when observations are not normalised
        or none was seen yet."""
        if self.obs_rms is None:
            return None
        rms = self.obs_rms
        return ObsStats(rms.mean.copy(), rms.var.copy(), rms.count, self.clip_obs, self.epsilon)

    def _scale_rewards(self, rewards: np.ndarray, done: np.ndarray) -> np.ndarray:
        if len(self.returns) != len(rewards):
            self.returns = np.zeros(len(rewards), np.float64)
        self.returns = self.returns * self.gamma + rewards
        self.ret_rms.update(self.returns)
        self.returns[done] = 0.0
        scaled = rewards / np.sqrt(self.ret_rms.var + self.epsilon)
        return np.clip(scaled, -self.clip_reward, self.clip_reward)


def _normalised(s: EnvStep, stats: ObsStats | None, reward: np.ndarray) -> EnvStep:
    """``s`` with ``reward`` and, when ``stats`` is given, its observations scaled."""
    if stats is None:
        return replace(s, reward=reward)
    final = None if s.final_obs is None else stats.apply(s.final_obs)
    return replace(s, obs=stats.apply(s.obs), reward=reward, final_obs=final)
