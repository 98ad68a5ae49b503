"""GAE (rl_algos.gae) against small cases computed by hand (Schulman et al. 2016, eq. 16)."""

from __future__ import annotations

import numpy as np
import pytest

from rl_algos.gae import compute_gae

# T = 3 steps, gamma 0.9, lambda 0.8, so gamma * lambda = 0.72:
#   delta_2 = 1 + 0.9 * 0.2 - 0.3 = 0.88                 A_2 = 0.88
#   delta_1 = 1 + 0.9 * 0.3 - 0.4 = 0.87                 A_1 = 0.87 + 0.72 * 0.88 = 1.5036
#   delta_0 = 1 + 0.9 * 0.4 - 0.5 = 0.86                 A_0 = 0.86 + 0.72 * 1.5036 = 1.942592
# With the episode ending after step 1 (done_1 = 1): delta_1 = 1 - 0.4 = 0.6 = A_1 and
#   A_0 = 0.86 + 0.72 * 0.6 = 1.292 (A_2 unchanged).
REWARDS = [1.0, 1.0, 1.0]
VALUES = [0.5, 0.4, 0.3]


def test_gae_without_episode_end():
    adv, ret = compute_gae(
        np.array(REWARDS)[:, None],
        np.array(VALUES)[:, None],
        np.zeros((3, 1)),
        np.array([0.2]),
        gamma=0.9,
        lam=0.8,
    )
    assert adv.dtype == np.float32 and adv.shape == (3, 1)
    np.testing.assert_allclose(adv[:, 0], [1.942592, 1.5036, 0.88], rtol=1e-6)
    np.testing.assert_allclose(ret[:, 0], [2.442592, 1.9036, 1.18], rtol=1e-6)


def test_gae_episode_end_cuts_bootstrap_per_env():
    rewards = np.array([REWARDS, REWARDS]).T  # (T=3, E=2)
    values = np.array([VALUES, VALUES]).T
    dones = np.array([[0, 0], [1, 0], [0, 0]])  # env 0 ends after step 1
    adv, _ = compute_gae(rewards, values, dones, np.array([0.2, 0.2]), gamma=0.9, lam=0.8)
    np.testing.assert_allclose(adv[:, 0], [1.292, 0.6, 0.88], rtol=1e-6)
    np.testing.assert_allclose(adv[:, 1], [1.942592, 1.5036, 0.88], rtol=1e-6)


def test_gae_lambda_one_is_discounted_return_minus_value():
    r = np.array([[1.0], [2.0], [3.0]])
    v = np.array([[0.0], [0.0], [0.0]])
    _, ret = compute_gae(r, v, np.zeros((3, 1)), np.array([10.0]), gamma=0.5, lam=1.0)
    np.testing.assert_allclose(
        ret[:, 0], [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 10, 2 + 0.5 * 3 + 0.25 * 10, 3 + 0.5 * 10]
    )


def test_gae_rejects_mismatched_shapes():
    with pytest.raises(ValueError):
        compute_gae(np.zeros((3, 2)), np.zeros((3, 1)), np.zeros((3, 2)), np.zeros(2))
