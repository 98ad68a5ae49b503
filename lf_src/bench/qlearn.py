"""Synchronized parallel Q-learning on Blackjack-v1 (benchmark workload 3): the three roles.

Each round, every :class:`Rollout` runs ``steps`` environment steps with an epsilon-greedy
policy (a small MLP evaluated in numpy), the :class:`Replay` buffer stores all transitions and
draws one minibatch, and the :class:`Learner` (torch, CPU) takes one DQN step on it and hands
out the new weights. ``QLearn.lf`` wires them as reactors; the Ray peer and the plain loop of
``bench/sync_qlearn.py`` call the same classes in the same order, so, given the seed, all of
them end with the same weights.

Data between the roles is plain numpy, so reactors in different workers exchange it through
shared memory without pickling:

- weights: float32 vector of :data:`N_PARAMS` (the Q-network's parameters, torch order);
- transitions and minibatches: float32 arrays of shape (rows, :data:`ROW`), columns
  ``obs[3], action, reward, next_obs[3], done``.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

OBS_DIM = 3  # Blackjack observation: player's sum, dealer's card, usable ace
N_ACTIONS = 2  # stick, hit
HIDDEN = 64  # Q-network: OBS_DIM -> HIDDEN (ReLU) -> N_ACTIONS
ROW = 2 * OBS_DIM + 3  # one transition
N_PARAMS = HIDDEN * OBS_DIM + HIDDEN + N_ACTIONS * HIDDEN + N_ACTIONS
_SCALE = np.array([1 / 32, 1 / 10, 1.0], dtype=np.float32)


def features(obs) -> np.ndarray:
    """A Blackjack observation as float32 features of order one, shape (OBS_DIM,)."""
    return np.asarray(obs, dtype=np.float32) * _SCALE


def unflatten(flat: np.ndarray):
    """Views ``(w1 (HIDDEN, OBS_DIM), b1, w2 (N_ACTIONS, HIDDEN), b2)`` of a weight vector."""
    i = HIDDEN * OBS_DIM
    w1 = flat[:i].reshape(HIDDEN, OBS_DIM)
    b1 = flat[i : i + HIDDEN]
    i += HIDDEN
    w2 = flat[i : i + N_ACTIONS * HIDDEN].reshape(N_ACTIONS, HIDDEN)
    b2 = flat[i + N_ACTIONS * HIDDEN :]
    return w1, b1, w2, b2


class Rollout:
    """Blackjack-v1 number ``index``, stepped ``steps`` times per :meth:`run` (epsilon-greedy).

    The environment is reset with a seed derived from ``(seed, index)``; exploration draws come
    from ``numpy.random.default_rng([seed, index])``.
    """

    def __init__(self, seed: int, index: int, steps: int = 100, epsilon: float = 0.1):
        self.env = gym.make("Blackjack-v1")
        self.rng = np.random.default_rng([seed, index])
        seed_seq = np.random.SeedSequence([seed, index])
        obs, _ = self.env.reset(seed=int(seed_seq.generate_state(1)[0]))
        self.x = features(obs)
        self.steps, self.epsilon = steps, epsilon

    def run(self, weights: np.ndarray) -> np.ndarray:
        """``steps`` transitions under ``weights``: float32 array (steps, ROW)."""
        w1, b1, w2, b2 = (np.array(p, dtype=np.float64) for p in unflatten(weights))
        explore = self.rng.random(self.steps) < self.epsilon
        random_actions = self.rng.integers(N_ACTIONS, size=self.steps)
        out = np.empty((self.steps, ROW), dtype=np.float32)
        x = self.x
        for t in range(self.steps):
            if explore[t]:
                a = int(random_actions[t])
            else:
                a = int(np.argmax(w2 @ np.maximum(w1 @ x + b1, 0.0) + b2))
            obs, reward, terminated, truncated, _ = self.env.step(a)
            x2 = features(obs)
            out[t, :OBS_DIM] = x
            out[t, OBS_DIM] = a
            out[t, OBS_DIM + 1] = reward
            out[t, OBS_DIM + 2 : 2 * OBS_DIM + 2] = x2
            out[t, -1] = terminated
            if terminated or truncated:
                obs, _ = self.env.reset()
                x2 = features(obs)
            x = x2
        self.x = x
        return out


class Replay:
    """A ring buffer of ``capacity`` transitions; :meth:`sample` draws ``batch`` rows uniformly
    (with replacement) from ``numpy.random.default_rng([seed, 1 << 20])``."""

    def __init__(self, seed: int, batch: int = 500, capacity: int = 100_000):
        self.data = np.zeros((capacity, ROW), dtype=np.float32)
        self.size = self.next = 0
        self.batch = batch
        self.rng = np.random.default_rng([seed, 1 << 20])

    def add(self, rows: np.ndarray) -> None:
        """Store ``rows`` (k, ROW), overwriting the oldest when full."""
        cap = len(self.data)
        idx = (self.next + np.arange(len(rows))) % cap
        self.data[idx] = rows
        self.next = (self.next + len(rows)) % cap
        self.size = min(cap, self.size + len(rows))

    def sample(self) -> np.ndarray:
        """A minibatch, float32 (batch, ROW)."""
        return self.data[self.rng.integers(0, self.size, size=self.batch)]


class Learner:
    """DQN on a torch MLP (Adam, ``lr``; discount ``gamma``; target network copied every
    ``sync_every`` updates). One torch thread, deterministic algorithms."""

    def __init__(self, seed: int, lr: float = 0.01, gamma: float = 0.99, sync_every: int = 10):
        import torch

        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
        self.torch = torch
        self.q = self._mlp(torch.Generator().manual_seed(seed))
        self.target = self._mlp(torch.Generator())
        self.target.load_state_dict(self.q.state_dict())
        self.opt = torch.optim.Adam(self.q.parameters(), lr=lr)
        self.gamma, self.sync_every = gamma, sync_every
        self.updates = 0
        self.loss = float("nan")

    def _mlp(self, generator: Any) -> Any:
        """The Q-network with torch's default initialisation drawn from ``generator`` (a
        ``torch.Generator``; never the process-wide one, which other reactors may share)."""
        nn = self.torch.nn
        layers = [
            nn.Linear(OBS_DIM, HIDDEN, device="meta"),
            nn.Linear(HIDDEN, N_ACTIONS, device="meta"),
        ]
        for layer in layers:
            layer.to_empty(device="cpu")
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(layer.in_features)
            nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
        return nn.Sequential(layers[0], nn.ReLU(), layers[1])

    def weights(self) -> np.ndarray:
        """The Q-network's parameters, float32 (N_PARAMS,), a fresh array."""
        with self.torch.no_grad():
            return self.torch.nn.utils.parameters_to_vector(self.q.parameters()).numpy().copy()

    def update(self, batch: np.ndarray) -> float:
        """One DQN step on a minibatch (rows, ROW); returns the loss (mean squared TD error)."""
        torch = self.torch
        b = torch.from_numpy(
            batch if batch.flags.writeable else batch.copy()
        )  # shm views are read-only
        x, a, r = b[:, :OBS_DIM], b[:, OBS_DIM].long(), b[:, OBS_DIM + 1]
        x2, done = b[:, OBS_DIM + 2 : 2 * OBS_DIM + 2], b[:, -1]
        with torch.no_grad():
            target = r + self.gamma * (1.0 - done) * self.target(x2).max(dim=1).values
        q = self.q(x).gather(1, a[:, None]).squeeze(1)
        loss = torch.nn.functional.mse_loss(q, target)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.updates += 1
        if self.updates % self.sync_every == 0:
            self.target.load_state_dict(self.q.state_dict())
        self.loss = loss.item()
        return self.loss


def checksum(weights: np.ndarray) -> float:
    """A float that identifies a weight vector (sum of |w| in float64)."""
    return float(np.abs(weights.astype(np.float64)).sum())
