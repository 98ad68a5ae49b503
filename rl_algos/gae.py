"""Generalized Advantage Estimation.

Source: Schulman, Moritz, Levine, Jordan, Abbeel (2016), "High-Dimensional Continuous Control
Using Generalized Advantage Estimation", ICLR, eq. 11-16:
    delta_t = r_t + gamma * V(s_{t+1}) * (1 - done_t) - V(s_t)
    A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
and the value targets (returns) are A_t + V(s_t).
"""

from __future__ import annotations

import numpy as np


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    dones: np.ndarray,
    last_value: np.ndarray,
    gamma: float = 0.99,
    lam: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns of a rollout of T steps in E environments.

    - ``rewards``: (T, E), reward r_t of the action taken at step t;
    - ``values``: (T, E), V(s_t) of the state acted on at step t;
    - ``dones``: (T, E), 1 when the episode ended after step t (no bootstrap from s_{t+1});
      a time-limit truncation should be counted as done with gamma * V(final state) already
      added to its reward;
    - ``last_value``: (E,), V(s_T) of the state after the rollout.

    Returns ``(advantages, returns)``, both (T, E) float32 (computed in float64).
    Raises ValueError when the shapes disagree.
    """
    r = np.asarray(rewards, np.float64)
    v = np.asarray(values, np.float64)
    d = np.asarray(dones, np.float64)
    if r.shape != v.shape or r.shape != d.shape or np.shape(last_value) != r.shape[1:]:
        raise ValueError(
            f"compute_gae: shapes {r.shape}, {v.shape}, {d.shape}, "
            f"{np.shape(last_value)} do not agree"
        )
    adv = np.zeros_like(r)
    next_value = np.asarray(last_value, np.float64)
    running = np.zeros(r.shape[1:])
    for t in range(r.shape[0] - 1, -1, -1):
        live = 1.0 - d[t]
        delta = r[t] + gamma * next_value * live - v[t]
        running = delta + gamma * lam * live * running
        adv[t] = running
        next_value = v[t]
    return adv.astype(np.float32), (adv + v).astype(np.float32)
