"""A preallocated experience replay buffer with uniform sampling (Lin 1992; Mnih et al. 2015).

The arrays are allocated once at full capacity; adding writes in place at a cursor that wraps
around, overwriting the oldest transitions. Sampling draws indices from a generator passed by
the caller (the owning reactor's), so the sampled batches depend only on the program seed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from .envs import EnvStep


class ReplayBuffer:
    """Transitions (obs, action, reward, next_obs, done) in fixed-size numpy arrays.

    ``obs_shape``/``obs_dtype``: one observation (e.g. (4,) float32, or (4, 84, 84) uint8);
    ``action_shape``/``action_dtype``: one action ((), int64 for a discrete space).
    ``done`` means the next state is terminal (no bootstrapping); a time-limit truncation
    must be added with ``done=False`` and the episode's real last observation as next_obs.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        obs_dtype: npt.DTypeLike = np.float32,
        action_shape: tuple[int, ...] = (),
        action_dtype: npt.DTypeLike = np.int64,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"ReplayBuffer capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self.next_obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self.actions = np.zeros((capacity, *action_shape), action_dtype)
        self.rewards = np.zeros(capacity, np.float32)
        self.dones = np.zeros(capacity, np.float32)
        self.pos = 0  # where the next transition goes
        self.size = 0  # how many slots hold data (<= capacity)
        self.added = 0  # transitions added in total

    def __len__(self) -> int:
        return self.size

    def add(
        self,
        obs: npt.ArrayLike,
        actions: npt.ArrayLike,
        rewards: npt.ArrayLike,
        next_obs: npt.ArrayLike,
        dones: npt.ArrayLike,
    ) -> None:
        """Append a batch of B transitions (leading dimension B on every argument), in order;
        when the end of the arrays is reached, writing continues at index 0. B may exceed the
        capacity (only the last ``capacity`` transitions are kept)."""
        obs = np.asarray(obs)
        b = obs.shape[0]
        idx = (self.pos + np.arange(b)) % self.capacity
        if b > self.capacity:  # later rows win, as if added one by one
            idx, keep = idx[-self.capacity :], slice(b - self.capacity, b)
        else:
            keep = slice(0, b)
        self.obs[idx] = obs[keep]
        self.next_obs[idx] = np.asarray(next_obs)[keep]
        self.actions[idx] = np.asarray(actions)[keep]
        self.rewards[idx] = np.asarray(rewards)[keep]
        self.dones[idx] = np.asarray(dones)[keep]
        self.pos = int((self.pos + b) % self.capacity)
        self.size = min(self.size + b, self.capacity)
        self.added += b

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict:
        """``batch_size`` transitions drawn uniformly with replacement from the stored ones.

        Returns a dict of new arrays: ``obs`` and ``next_obs`` (B, *obs_shape), ``actions``
        (B, *action_shape), ``rewards`` and ``dones`` (B,) float32. ValueError when empty.
        """
        if self.size == 0:
            raise ValueError("cannot sample from an empty ReplayBuffer")
        idx = rng.integers(0, self.size, size=batch_size)
        return {
            "obs": self.obs[idx],
            "actions": self.actions[idx],
            "rewards": self.rewards[idx],
            "next_obs": self.next_obs[idx],
            "dones": self.dones[idx],
        }


class ReplayFeed:
    """Fills a :class:`ReplayBuffer` from a bank of environment reactors, tag by tag, and says
    when to sample (DQN's replay start size and update frequency, Mnih et al. 2015).

    At each tag :meth:`observe` gets the joined EnvStep (the result of the previous tag's
    actions) and those actions; it stores (s, a, r, s', terminated) for every environment,
    with s' the episode's real last observation where one ended, so a time-limit truncation
    still bootstraps. ``rng`` is the owning reactor's generator.
    """

    def __init__(
        self,
        capacity: int,
        batch_size: int,
        learning_starts: int,
        train_frequency: int,
        rng: np.random.Generator,
        gradient_steps: int = 1,
    ):
        self.capacity, self.batch_size = capacity, batch_size
        self.gradient_steps = gradient_steps
        self.learning_starts, self.train_frequency = learning_starts, train_frequency
        self.rng = rng
        self.buffer: ReplayBuffer | None = None
        self.prev_obs: np.ndarray | None = None
        self.tags = 0

    def observe(self, step: EnvStep, actions: np.ndarray | None) -> list | None:
        """Store the transitions completed by ``step`` (an rl_algos.envs.EnvStep) for
        ``actions`` ((E,) array; None at the first tag); when updates are due, return
        ``gradient_steps`` sampled batches (dicts, see :meth:`ReplayBuffer.sample`), else
        None."""
        from .envs import next_obs

        batch = None
        if actions is not None:
            o = self.prev_obs
            assert o is not None  # set at the first tag, before any actions
            if self.buffer is None:
                self.buffer = ReplayBuffer(
                    self.capacity,
                    o.shape[1:],
                    o.dtype,
                    np.shape(actions)[1:],
                    np.asarray(actions).dtype,
                )
            self.buffer.add(o, actions, step.reward, next_obs(step), step.terminated)
            self.tags += 1
            if len(self.buffer) >= self.learning_starts and self.tags % self.train_frequency == 0:
                batch = [
                    self.buffer.sample(self.batch_size, self.rng)
                    for _ in range(self.gradient_steps)
                ]
        self.prev_obs = step.obs
        return batch
