"""V-trace: off-policy value targets and advantages for a rollout acted by an older policy.

Source: Espeholt, Soyer, Munos, Simonyan, Mnih, Ward, Doron, Firoiu, Harley, Dunning, Legg,
Kavukcuoglu (2018), "IMPALA: Scalable Distributed Deep-RL with Importance Weighted
Actor-Learner Architectures", ICML, section 4.1. With behaviour policy mu (the actors'),
target policy pi (the learner's) and truncated importance weights
rho_s = min(rho_bar, pi(a_s|x_s) / mu(a_s|x_s)) and c_s = lambda * min(c_bar, pi / mu)
(the lambda of section 4.2), the n-step target of eq. 1 in its recursive form (Remark 1):

    delta_s = rho_s * (r_s + gamma * V(x_{s+1}) - V(x_s))
    v_s     = V(x_s) + delta_s + gamma * c_s * (v_{s+1} - V(x_{s+1}))

and the policy-gradient advantage of eq. 4, r_s + gamma * v_{s+1} - V(x_s). The factor rho_s
of eq. 4 is left out here: the clipped PPO surrogate that uses these advantages
(:mod:`rl_algos.ppo`) already weights each sample by its own ratio pi_theta / mu. An episode
that ended at step s stops both recursions there (no bootstrap from x_{s+1}).

On-policy (pi = mu: every rho_s = 1, c_s = lambda) the targets v_s are GAE(lambda)'s returns
(:func:`rl_algos.gae.compute_gae`).
"""

from __future__ import annotations

import numpy as np


def compute_vtrace(
    rewards: np.ndarray,
    values: np.ndarray,
    dones: np.ndarray,
    last_value: np.ndarray,
    log_rhos: np.ndarray,
    gamma: float = 0.99,
    lam: float = 1.0,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and V-trace targets of a rollout of T steps in E environments.

    - ``rewards``, ``values`` (V(x_s) under the target policy's critic), ``dones``: (T, E),
      as :func:`rl_algos.gae.compute_gae` takes them (a time-limit truncation counted as done
      with gamma * V(final state) already in its reward);
    - ``last_value``: (E,), V(x_T) of the state after the rollout;
    - ``log_rhos``: (T, E), log pi(a_s|x_s) - log mu(a_s|x_s) of the actions taken;
    - ``rho_bar``, ``c_bar``: the truncation levels (the paper's experiments use 1 for both).

    Returns ``(advantages, targets)``, both (T, E) float32 (computed in float64).
    Raises ValueError when the shapes disagree.
    """
    r = np.asarray(rewards, np.float64)
    v = np.asarray(values, np.float64)
    live = 1.0 - np.asarray(dones, np.float64)
    ratio = np.exp(np.asarray(log_rhos, np.float64))
    shapes = {r.shape, v.shape, live.shape, ratio.shape}
    if len(shapes) > 1 or np.shape(last_value) != r.shape[1:]:
        raise ValueError(
            f"compute_vtrace: shapes {r.shape}, {v.shape}, {live.shape}, {ratio.shape}, "
            f"{np.shape(last_value)} do not agree"
        )
    rho, c = np.minimum(rho_bar, ratio), lam * np.minimum(c_bar, ratio)
    targets, adv = np.zeros_like(r), np.zeros_like(r)
    next_value = next_target = np.asarray(last_value, np.float64)
    for t in range(r.shape[0] - 1, -1, -1):
        discount = gamma * live[t]
        delta = rho[t] * (r[t] + discount * next_value - v[t])
        targets[t] = v[t] + delta + discount * c[t] * (next_target - next_value)
        adv[t] = r[t] + discount * next_target - v[t]
        next_value, next_target = v[t], targets[t]
    return adv.astype(np.float32), targets.astype(np.float32)
