"""The PPO learner's update (rl_algos.ppo): the clip range annealed like the learning rate
(``anneal_clip``), the statistics of a whole update, and the entropy term that a zero
coefficient leaves out of the gradient."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
gym = pytest.importorskip("gymnasium")

from rl_algos.envs import EnvGroup  # noqa: E402
from rl_algos.ppo import (  # noqa: E402
    ActRecord,
    PPOActor,
    PPOConfig,
    PPOLearner,
    concat_records,
    mean_rows,
)

THREADS: list[int] = []  # torch's thread count in each minibatch of learner_after_rollout


def learner_after_rollout(**hparams: object) -> tuple[PPOLearner, list[float]]:
    """A CartPole learner (8 environments, rollouts of 8 steps) that has taken one rollout and
    one update, and the clip range each of its minibatches used."""
    cfg = PPOConfig(num_steps=8, minibatch_size=32, update_epochs=2, device="cpu", **hparams)
    group = EnvGroup("CartPole-v1", 8, np.random.default_rng(0))
    learner = PPOLearner(
        cfg, group.observation_space, group.action_space, np.random.default_rng(1), 3
    )
    clips: list[float] = []
    minibatch = learner._minibatch

    def spy(d: dict, idx: torch.Tensor, clip: float) -> torch.Tensor:
        clips.append(clip)
        THREADS.append(torch.get_num_threads())
        return minibatch(d, idx, clip)

    learner._minibatch = spy  # type: ignore[method-assign]
    actor = PPOActor(np.random.default_rng(2))
    actor.load(learner.weights())
    steps, record = [group.reset()], None
    for _ in range(cfg.num_steps + 1):
        learner.observe(steps, record)
        record = actor.act(steps[0].obs)
        steps = [group.step(record.actions)]
    assert learner.updates == 1
    return learner, clips


def test_clip_range_anneals_with_the_steps_taken():
    """With anneal_clip, epsilon is clip_coef * (1 - env_steps / total_steps), as the
    learning rate with anneal_lr; both at the same fraction."""
    learner, clips = learner_after_rollout(
        anneal_clip=True, anneal_lr=True, clip_coef=0.2, learning_rate=1e-3, total_steps=256
    )
    frac = 1 - 64 / 256  # one rollout of 8 steps in 8 environments
    assert clips == [pytest.approx(0.2 * frac)] * 4  # 2 epochs x 2 minibatches
    assert learner.opt.lr == pytest.approx(1e-3 * frac)


def test_clip_range_stays_without_anneal_clip():
    learner, clips = learner_after_rollout(anneal_lr=True, clip_coef=0.2, total_steps=256)
    assert clips == [0.2] * 4
    assert learner.cfg.anneal_clip is False


def test_annealed_clip_never_goes_below_zero():
    _, clips = learner_after_rollout(anneal_clip=True, clip_coef=0.2, total_steps=32)
    assert clips == [0.0] * 4


def test_statistics_are_the_mean_over_the_minibatches():
    learner, _ = learner_after_rollout()
    assert set(learner.stats) == {"pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac"}
    assert all(isinstance(v, float) and np.isfinite(v) for v in learner.stats.values())
    assert 0.0 <= learner.stats["clipfrac"] <= 1.0


def test_mean_rows_sums_in_float64_row_by_row():
    rows = torch.tensor([[1e8, 1.0], [1.0, 2.0], [-1e8, 3.0]], dtype=torch.float32)
    mean = mean_rows(rows)
    assert mean.dtype == np.float64
    assert mean.tolist() == [(1e8 + 1.0 - 1e8) / 3, 2.0]


def test_zero_entropy_coefficient_leaves_the_gradient_unchanged():
    """ent_coef 0 drops the entropy term from the loss: the weights after an update are those
    of a coefficient so small that its term rounds away, bit for bit."""
    zero, _ = learner_after_rollout(ent_coef=0.0)
    tiny, _ = learner_after_rollout(ent_coef=1e-30)
    for a, b in zip(zero.opt.params, tiny.opt.params):
        assert torch.equal(a, b)


def test_an_update_runs_on_its_own_thread_count():
    """``update_threads`` is torch's thread count during an update's minibatches, and the
    process's count comes back after it; a count below 1 is refused."""
    from rl_algos.device import torch_threads

    before = torch.get_num_threads()
    THREADS.clear()
    learner_after_rollout(update_threads=before + 1)
    assert THREADS and set(THREADS) == {before + 1}
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="at least 1"):
        with torch_threads(0):
            pass


def test_an_actor_acts_on_its_own_thread_count():
    """PPOActor's ``threads`` is torch's thread count during its forward pass only, and the
    actions do not depend on it (the same draws, the same numbers). (A Gaussian policy: an
    MLP actor-critic on the CPU acts in numpy, below.)"""
    group = EnvGroup("Pendulum-v1", 8, np.random.default_rng(0))
    learner = PPOLearner(
        PPOConfig(device="cpu"),
        group.observation_space,
        group.action_space,
        np.random.default_rng(1),
        3,
    )
    obs = group.reset().obs
    before = torch.get_num_threads()
    records, seen = [], []
    for threads in (1, before + 1):
        actor = PPOActor(np.random.default_rng(2), threads=threads)
        actor.load(learner.weights())
        forward = actor.net.forward
        actor.net.forward = lambda x, f=forward: seen.append(torch.get_num_threads()) or f(x)
        records.append(actor.act(obs))
    assert seen == [1, before + 1] and torch.get_num_threads() == before
    for a, b in zip(vars(records[0]).values(), vars(records[1]).values()):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_an_mlp_policy_acts_in_numpy_with_the_networks_function(activation):
    """On the CPU a PPOActor with an MLP actor-critic acts through NumpyActorCritic: the
    torch network's logits and values to float32 rounding, log-probabilities that sum to 1,
    and an actor that still pickles (checkpoints save it)."""
    import pickle

    from rl_algos.networks import export_weights, kind_of, numpy_actor_critic
    from rl_algos.ppo import log_softmax

    group = EnvGroup("CartPole-v1", 8, np.random.default_rng(0))
    learner = PPOLearner(
        PPOConfig(device="cpu", activation=activation, hidden=(32, 16)),
        group.observation_space,
        group.action_space,
        np.random.default_rng(1),
        3,
    )
    obs = group.reset().obs * 3  # spread the pre-activations over both signs
    w = export_weights(learner.net, kind_of(learner.net))
    logits, values = numpy_actor_critic(w)(obs)
    with torch.no_grad():
        ref_logits, ref_values = learner.net(torch.as_tensor(obs))
    assert logits.dtype == values.dtype == np.float32 and values.shape == (8,)
    np.testing.assert_allclose(logits, ref_logits.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values, ref_values.numpy(), rtol=1e-5, atol=1e-6)
    actor = PPOActor(np.random.default_rng(2))
    actor.load(learner.weights())
    assert actor.numpy_net is not None
    record = actor.act(obs)
    np.testing.assert_allclose(record.values, ref_values.numpy(), rtol=1e-5, atol=1e-6)
    expected = torch.log_softmax(ref_logits, -1).numpy()[np.arange(8), record.actions]
    np.testing.assert_allclose(record.logp, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.exp(log_softmax(logits)).sum(1), 1.0, rtol=1e-6)
    again = pickle.loads(pickle.dumps(actor))
    assert np.array_equal(again.act(obs).values, record.values)


def test_networks_other_than_an_mlp_actor_critic_act_in_torch():
    from rl_algos.networks import export_weights, kind_of, numpy_actor_critic

    for space in (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Box(-1, 1, (3,))):
        action_space = gym.spaces.Discrete(6) if space.dtype == np.uint8 else space
        learner = PPOLearner(
            PPOConfig(device="cpu"), space, action_space, np.random.default_rng(1), 3
        )
        assert numpy_actor_critic(export_weights(learner.net, kind_of(learner.net))) is None


def test_records_of_a_policy_bank_join_in_member_order():
    first = ActRecord(
        np.array([1, 2]), np.array([-0.5, -0.25], np.float32), np.zeros(2, np.float32)
    )
    second = ActRecord(np.array([0]), np.array([-1.0], np.float32), np.ones(1, np.float32))
    joined = concat_records([first, second])
    assert joined.actions.tolist() == [1, 2, 0]
    assert joined.logp.tolist() == [-0.5, -0.25, -1.0] and joined.logp.dtype == np.float32
    assert joined.values.tolist() == [0.0, 0.0, 1.0]
    assert concat_records([first]) is first
    with pytest.raises(ValueError):
        concat_records([])
