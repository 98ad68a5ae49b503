"""A user's own gymnasium environment, registered when its module is imported: the id
``corridor:Corridor-v0`` has gymnasium import this module first (tests/test_rl_eval.py)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    """Walk right along a corridor of 6 cells to its end: observation (2,) float32 (the cell
    over 5, the steps taken over 20), 2 actions (0 left, 1 right), reward 1 at the end (the
    episode terminates) and -0.01 for every other step."""

    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.cell = int(self.np_random.integers(0, 3))
        self.steps = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.cell = min(max(self.cell + (1 if int(action) == 1 else -1), 0), 5)
        self.steps += 1
        done = self.cell == 5
        return self._obs(), 1.0 if done else -0.01, done, False, {}

    def _obs(self) -> np.ndarray:
        return np.array([self.cell / 5, min(self.steps, 20) / 20], np.float32)


gym.register(id="Corridor-v0", entry_point=f"{__name__}:Corridor", max_episode_steps=20)
