"""The replay buffer (rl_algos.replay): uniform sampling from the owner's generator,
wrap-around, and transitions assembled from environment steps."""

from __future__ import annotations

import numpy as np
import pytest

from rl_algos.envs import EnvStep
from rl_algos.replay import ReplayBuffer, ReplayFeed


def filled(capacity: int, n: int) -> ReplayBuffer:
    """A buffer of (2,) float32 observations where transition i has obs [i, -i], action i."""
    buf = ReplayBuffer(capacity, (2,))
    i = np.arange(n)
    buf.add(np.stack([i, -i], 1), i, i * 10.0, np.stack([i + 1, -i - 1], 1), i % 2)
    return buf


def test_sample_draws_only_stored_transitions_with_consistent_fields():
    buf = filled(100, 30)
    s = buf.sample(500, np.random.default_rng(0))
    assert s["obs"].shape == (500, 2) and s["obs"].dtype == np.float32
    assert s["actions"].dtype == np.int64 and s["rewards"].shape == (500,)
    a = s["actions"]
    assert a.min() >= 0 and a.max() <= 29
    np.testing.assert_array_equal(s["obs"][:, 0], a)
    np.testing.assert_array_equal(s["next_obs"][:, 0], a + 1)
    np.testing.assert_array_equal(s["rewards"], a * 10.0)
    np.testing.assert_array_equal(s["dones"], a % 2)
    counts = np.bincount(a, minlength=30)  # roughly uniform: every index drawn
    assert counts.min() > 0


def test_sample_depends_only_on_the_generator():
    buf = filled(64, 64)
    a = buf.sample(32, np.random.default_rng(7))["actions"]
    b = buf.sample(32, np.random.default_rng(7))["actions"]
    c = buf.sample(32, np.random.default_rng(8))["actions"]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_wrap_around_overwrites_oldest():
    buf = filled(5, 7)  # transitions 0..6 into 5 slots
    assert len(buf) == 5 and buf.pos == 2 and buf.added == 7
    np.testing.assert_array_equal(buf.actions, [5, 6, 2, 3, 4])
    buf.add(np.full((1, 2), 9.0), [9], [0.0], np.zeros((1, 2)), [0])
    np.testing.assert_array_equal(buf.actions, [5, 6, 9, 3, 4])
    assert buf.pos == 3


def test_batch_larger_than_capacity_keeps_the_last_ones():
    buf = filled(4, 10)  # 10 transitions, one add, 4 slots
    assert sorted(buf.actions.tolist()) == [6, 7, 8, 9]
    assert buf.pos == 10 % 4


def test_empty_buffer_cannot_be_sampled():
    with pytest.raises(ValueError):
        ReplayBuffer(3, (2,)).sample(1, np.random.default_rng(0))


def test_feed_stores_final_observation_of_finished_episodes():
    rng = np.random.default_rng(0)
    feed = ReplayFeed(100, 4, learning_starts=2, train_frequency=1, rng=rng)
    f = np.zeros(2, bool)
    first = EnvStep(np.array([[0.0], [10.0]], np.float32), np.zeros(2, np.float32), f, f)
    assert feed.observe(first, None) is None
    # env 1's episode ends: its new obs is a reset (99), its final obs was 11
    second = EnvStep(
        np.array([[1.0], [99.0]], np.float32),
        np.ones(2, np.float32),
        np.array([False, True]),
        f,
        np.array([[0.0], [11.0]], np.float32),
    )
    batch = feed.observe(second, np.array([1, 0]))
    assert isinstance(batch, list) and len(batch) == 1
    b = feed.buffer
    np.testing.assert_array_equal(b.obs[:2, 0], [0.0, 10.0])
    np.testing.assert_array_equal(b.next_obs[:2, 0], [1.0, 11.0])
    np.testing.assert_array_equal(b.dones[:2], [0.0, 1.0])
    np.testing.assert_array_equal(b.actions[:2], [1, 0])
