"""A small traffic-junction environment and an MLP policy, in numpy (benchmark workload 4).

PettingZoo 1.27 has no cheap multi-agent environment that fits: its MPE moved to another
package, and SISL's pursuit needs pygame and scipy and takes 2.6 ms (4 agents) to 12 ms
(10 agents) per step here, which would measure the environment, not the framework. So this is
our own junction, in the spirit of the traffic-junction tasks of multi-agent RL:

- a ``size`` x ``size`` grid crossed by two two-lane roads; agent ``i`` drives route
  ``i mod 4`` (down, up, right, left), straight across;
- an inactive car enters its route's first cell with probability ``p_arrive`` per step;
  an active car moves one cell on action 1 (gas) and stays on action 0 (brake); a car that
  leaves the grid becomes inactive;
- reward per active car: ``-0.01 * steps on the road``, and ``-10`` when it shares its cell
  with another car (a collision); after ``max_steps`` steps the episode is truncated and reset;
- observation of agent ``i`` (float32, :data:`OBS_DIM`): active flag, row and column / size,
  one-hot route (4), and the number of cars in each of the 9 cells around it.

:class:`Policy` is a one-hidden-layer MLP (``OBS_DIM -> 64 -> N_ACTIONS``, tanh) with random
weights from the agent's own RNG; it samples its action from the softmax of its outputs.
"""

from __future__ import annotations

import math

import numpy as np

OBS_DIM = 16
N_ACTIONS = 2
HIDDEN = 64
_NEAR = np.array([(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1)])
_DRAWS = 1024  # uniform draws taken from an RNG in one call


class Junction:
    """The environment for ``n`` agents; :meth:`reset` and :meth:`step` return observations
    as one float32 array (n, OBS_DIM), a fresh array every call."""

    def __init__(
        self, n: int, seed: int = 0, size: int = 14, p_arrive: float = 0.3, max_steps: int = 40
    ):
        self.n, self.size, self.p_arrive, self.max_steps = n, size, p_arrive, max_steps
        mid = size // 2
        self.entry = np.array([(0, mid - 1), (size - 1, mid), (mid, 0), (mid - 1, size - 1)])
        self.heading = np.array([(1, 0), (-1, 0), (0, 1), (0, -1)])
        self.route = np.arange(n) % 4
        self.onehot = np.eye(4, dtype=np.float32)[self.route]
        self.rng = np.random.default_rng([seed, 1 << 21])
        self.collisions = 0
        self.reset()

    def reset(self) -> np.ndarray:
        self.pos = self.entry[self.route].copy()
        self.active = np.zeros(self.n, dtype=bool)
        self.age = np.zeros(self.n)
        self.t = 0
        return self._observe(self._grid())

    def step(self, actions: np.ndarray):
        """Move the cars by ``actions`` (int array (n,)); returns ``(obs, rewards (n,),
        truncated)``. A truncated episode is reset and ``obs`` is the new first observation."""
        go = self.active & (actions == 1)
        self.pos[go] += self.heading[self.route[go]]
        inside = ((self.pos >= 0) & (self.pos < self.size)).all(axis=1)
        self.active &= inside
        arrive = ~self.active & (self.rng.random(self.n) < self.p_arrive)
        self.pos[arrive | ~inside] = self.entry[self.route[arrive | ~inside]]
        self.active |= arrive
        self.age = np.where(self.active, np.where(arrive, 0.0, self.age + 1), 0.0)
        grid = self._grid()
        crash = self.active & (grid[self.pos[:, 0] + 1, self.pos[:, 1] + 1] > 1)
        self.collisions += int(crash.sum())
        rewards = -0.01 * self.age - 10.0 * crash
        self.t += 1
        if self.t >= self.max_steps:
            return self.reset(), rewards, True
        return self._observe(grid), rewards, False

    def _grid(self) -> np.ndarray:
        """Cars per cell, with a border of one empty cell: (size + 2, size + 2)."""
        side = self.size + 2
        cells = self.pos[self.active] + 1
        return np.bincount(cells[:, 0] * side + cells[:, 1], minlength=side * side).reshape(
            side, side
        )

    def _observe(self, grid: np.ndarray) -> np.ndarray:
        obs = np.zeros((self.n, OBS_DIM), dtype=np.float32)
        obs[:, 0] = self.active
        obs[:, 1:3] = self.pos / self.size
        obs[:, 3:7] = self.onehot
        near = self.pos[:, None, :] + 1 + _NEAR[None]
        obs[:, 7:] = grid[near[..., 0], near[..., 1]] * self.active[:, None]
        return obs


class Policy:
    """Agent ``index``'s MLP; weights and action draws from ``default_rng([seed, index])``."""

    def __init__(self, seed: int, index: int):
        rng = np.random.default_rng([seed, index])
        self.w1 = rng.uniform(-1, 1, (HIDDEN, OBS_DIM)) / np.sqrt(OBS_DIM)
        self.b1 = np.zeros(HIDDEN)
        self.w2 = rng.uniform(-1, 1, (N_ACTIONS, HIDDEN)) / np.sqrt(HIDDEN)
        self.b2 = np.zeros(N_ACTIONS)
        self.rng = rng
        self._u: list = []

    def act(self, obs: np.ndarray) -> int:
        """An action for one observation (float32 (OBS_DIM,)), sampled from the softmax of
        the two outputs: 1 with probability ``1 / (1 + exp(l0 - l1))``."""
        l0, l1 = (self.w2 @ np.tanh(self.w1 @ obs + self.b1) + self.b2).tolist()
        if not self._u:
            self._u = self.rng.random(_DRAWS).tolist()
        return int(self._u.pop() * (1.0 + math.exp(min(l0 - l1, 50.0))) < 1.0)
