"""A tiny PettingZoo parallel environment whose agents come and go, for the adapter's tests.

Three agents, episodes of 4 steps: ``a`` plays every step; ``b`` is there from the reset and
is terminated by step 2; ``c`` joins after step 1 and is truncated with ``a`` at step 4.
Observations (float32) tell the agent and the step apart: ``a``'s and ``c``'s have two values
``(10 * slot + t, t)``, ``b``'s one, ``10 + t``. Each live agent gets reward ``slot + 1`` per
step. The actions each step received are kept in ``received`` (a list of dicts).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from pettingzoo.utils.env import ParallelEnv

SLOT = {"a": 0, "b": 1, "c": 2}


class ComingAndGoing(ParallelEnv):
    """See the module's docstring; ``length``: steps per episode (at least 3)."""

    metadata = {"name": "coming_and_going_v0"}

    def __init__(self, length: int = 4) -> None:
        self.length = length
        self.possible_agents = ["a", "b", "c"]
        self.agents: list[str] = []
        self.t = 0
        self.received: list[dict] = []

    def observation_space(self, agent: str) -> gym.Space:
        return gym.spaces.Box(-np.inf, np.inf, (1 if agent == "b" else 2,), np.float32)

    def action_space(self, agent: str) -> gym.Space:
        return gym.spaces.Discrete(3)

    def _obs(self, agent: str) -> np.ndarray:
        first = 10 * SLOT[agent] + self.t
        return np.array([first] if agent == "b" else [first, self.t], np.float32)

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, ["a", "b"]
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.received.append(dict(actions))
        acted, self.t = list(self.agents), self.t + 1
        rewards = {a: float(SLOT[a] + 1) for a in acted}
        term = {a: a == "b" and self.t == 2 for a in acted}
        trunc = {a: self.t == self.length for a in acted}
        obs = {a: self._obs(a) for a in acted}
        self.agents = [a for a in acted if not (term[a] or trunc[a])]
        if self.t == 1:
            self.agents.append("c")
            obs["c"] = self._obs("c")
        return obs, rewards, term, trunc, {a: {} for a in acted}


def parallel_env(length: int = 4) -> ComingAndGoing:
    """PettingZoo's module convention."""
    return ComingAndGoing(length)
