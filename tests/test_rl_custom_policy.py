"""A user's torch module as the network of the library's learners (rl_algos.custom_network,
rl_algos.custom_sac): the interface checked when the network is built, each mistake named on
one line; a PPO, DQN or SAC learner and its actor built from the factory act as their weights
say; a program whose PPOLearner gets ``network = "custom_policy:make"``
(examples/custom_policy.py) learns, gives the same returns.csv on 1 and 2 workers, and
``lf-rl eval`` plays its model, or says in one line that the module cannot be imported;
PendulumSAC with a custom policy and critics gives the same returns.csv on 1 and 2 workers,
resumes from a snapshot, and ``lf-rl eval`` plays its model."""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import ROOT, build

from rl_algos import cli
from rl_algos.config import ConfigError
from rl_algos.custom_network import CustomNetwork, check_network, custom_network
from rl_algos.custom_sac import CustomSACActor, custom_sac_actor
from rl_algos.distributions import log_softmax, sample_categorical
from rl_algos.dqn import DQNActor, DQNConfig, DQNLearner
from rl_algos.evaluate import greedy_action
from rl_algos.networks import (
    ActorCritic,
    GaussianActorCritic,
    QNetwork,
    SoftQNetwork,
    SquashedGaussianActor,
)
from rl_algos.ppo import PPOActor, PPOConfig, PPOLearner
from rl_algos.sac import SACActor, SACConfig, SACLearner

pytestmark = pytest.mark.xdist_group("rl-custom-policy")

FIXTURES = ROOT / "tests" / "custom_policy_fixtures"
EXAMPLE = ROOT / "examples" / "custom_policy.py"
CARTPOLE = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
PENDULUM = (gym.spaces.Box(-8.0, 8.0, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,)))
OBS = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)


@pytest.fixture(autouse=True)
def importable(monkeypatch):
    """examples/ and the faulty factories on the import path, for this test only."""
    monkeypatch.setattr(sys, "path", [*sys.path, str(EXAMPLE.parent), str(FIXTURES)])


def build_net(factory: str, spaces=CARTPOLE, role: str = "actor_critic", seed: int = 1, **kw):
    return custom_network(factory, kw, spaces, role, torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- the interface


@pytest.mark.parametrize(
    ("factory", "spaces", "message"),
    [
        ("faulty_nets:no_forward", CARTPOLE, "NoForward has no forward(obs) method"),
        (
            "faulty_nets:value_column",
            CARTPOLE,
            "forward(obs) on 2 observations must return (logits, value): ((2, 2) float32, "
            "(2,) float32); it returned (a (2, 2) float32 tensor, a (2, 1) float32 tensor)",
        ),
        (
            "faulty_nets:no_log_std",
            PENDULUM,
            "a policy for a Box action space needs a log_std attribute, a (1, 1) float32 "
            "tensor (nn.Parameter); TwoOutputs has none",
        ),
        (
            "faulty_nets:broken",
            CARTPOLE,
            "forward(obs) failed on a (2, 4) float32 tensor observations: RuntimeError: mat1",
        ),
        ("faulty_nets:not_a_module", CARTPOLE, "returned dict, not a torch.nn.Module"),
        ("faulty_nets:nowhere", CARTPOLE, "module 'faulty_nets' has no function 'nowhere'"),
    ],
)
def test_a_network_missing_the_interface_is_named_on_one_line(factory, spaces, message):
    with pytest.raises(ConfigError) as e:
        build_net(factory, spaces)
    text = str(e.value)
    assert text.startswith(f"network {factory}") and message in text and "\n" not in text


def test_a_factory_that_cannot_be_found_or_called_says_so():
    with pytest.raises(ConfigError, match=r"^network 'custom_policy' is not 'module:function'"):
        build_net("custom_policy")
    with pytest.raises(ConfigError) as e:
        build_net("no_such_module:make")
    assert str(e.value).startswith(
        "cannot import module 'no_such_module' of network no_such_module:make: No module named"
    ) and str(e.value).endswith("and on PYTHONPATH)")
    with pytest.raises(ConfigError, match="cannot be called as make.*'hiden'"):
        build_net("custom_policy:make", hiden=32)
    with pytest.raises(ConfigError, match="a Q-network needs a Discrete action space"):
        build_net("custom_policy:make", PENDULUM, role="q")


def test_the_built_in_networks_meet_the_same_interface():
    g = torch.Generator().manual_seed(0)
    check_network(ActorCritic((4,), 2, generator=g), "actor_critic", CARTPOLE, "built-in")
    gaussian = GaussianActorCritic((3,), 1, generator=g)
    check_network(gaussian, "actor_critic", PENDULUM, "built-in")
    check_network(QNetwork((4,), 2, generator=g), "q", CARTPOLE, "built-in")
    sac_actor = SquashedGaussianActor((3,), [-2.0], [2.0], (8,), generator=g)
    check_network(sac_actor, "sac_actor", PENDULUM, "built-in")
    check_network(SoftQNetwork((3,), 1, (8,), generator=g), "sac_critic", PENDULUM, "built-in")


def test_initial_weights_depend_on_the_generator_only():
    a, b, c = (build_net("custom_policy:make", seed=s) for s in (1, 1, 2))
    torch.manual_seed(123)  # torch's own generator is neither used nor disturbed
    before = torch.random.get_rng_state()
    d = build_net("custom_policy:make", seed=1)
    assert torch.equal(torch.random.get_rng_state(), before)
    for x, y in zip(a.state_dict().values(), b.state_dict().values()):
        assert torch.equal(x, y)
    assert not torch.equal(a.module.torso[0].weight, c.module.torso[0].weight)
    assert torch.equal(a.module.torso[0].weight, d.module.torso[0].weight)


# --------------------------------------------------------------------------- learners and actors


def test_a_ppo_actor_acts_with_the_learners_custom_network():
    cfg = PPOConfig(device="cpu", network="custom_policy:make", network_kwargs={"hidden": 16})
    learner = PPOLearner(cfg, *CARTPOLE, np.random.default_rng(1), 7)
    assert isinstance(learner.net, CustomNetwork) and not learner.continuous
    weights = learner.weights()
    assert weights.kind == "custom" and weights.spec["kwargs"] == {"hidden": 16}
    actor = PPOActor(np.random.default_rng(5))
    actor.load(weights)
    assert actor.numpy_net is None and isinstance(actor.net, CustomNetwork)
    record = actor.act(OBS)
    with torch.no_grad():
        logits, values = learner.net(torch.as_tensor(OBS))
    logp_all = log_softmax(logits.numpy())
    actions = sample_categorical(logp_all, np.random.default_rng(5))
    np.testing.assert_array_equal(record.actions, actions)
    np.testing.assert_allclose(record.logp, logp_all[np.arange(8), actions], rtol=1e-5)
    np.testing.assert_array_equal(record.values, values.numpy())


def test_a_gaussian_custom_policy_samples_around_its_mean():
    cfg = PPOConfig(device="cpu", network="custom_policy:make")
    learner = PPOLearner(cfg, *PENDULUM, np.random.default_rng(1), 7)
    assert learner.continuous
    with torch.no_grad():
        learner.net.log_std.fill_(-1.0)
    actor = PPOActor(np.random.default_rng(3))
    actor.load(learner.weights())
    obs = OBS[:, :3]
    record = actor.act(obs)
    with torch.no_grad():
        mean, _ = learner.net(torch.as_tensor(obs))
    noise = np.random.default_rng(3).standard_normal((8, 1)).astype(np.float32)
    np.testing.assert_allclose(record.actions, mean.numpy() + np.exp(-1.0) * noise, rtol=1e-5)
    stats = learner.update_on(*_rollout(learner, obs), lambda: False, 64)
    assert np.isfinite(stats["pg_loss"]) and learner.updates == 1


def _rollout(learner: PPOLearner, obs: np.ndarray) -> tuple:
    """A (4, 8) rollout of ``obs`` with random actions and advantages, for one update."""
    rng = np.random.default_rng(0)
    b = {
        "obs": np.broadcast_to(obs, (4, *obs.shape)).copy(),
        "actions": rng.standard_normal((4, 8, 1)).astype(np.float32),
        "logp": np.full((4, 8), -1.0, np.float32),
        "values": np.zeros((4, 8), np.float32),
    }
    adv = rng.standard_normal((4, 8)).astype(np.float32)
    return b, adv, adv.copy()


def test_a_dqn_learner_takes_a_custom_q_network():
    cfg = DQNConfig(device="cpu", network="custom_policy:make_q", learning_starts=0)
    learner = DQNLearner(cfg, *CARTPOLE, 4)
    assert learner.checkpoint()["kind"] == "custom"
    actor = DQNActor(np.random.default_rng(0), start_e=0.0, end_e=0.0)
    actor.load(learner.weights())
    with torch.no_grad():
        greedy = learner.net(torch.as_tensor(OBS)).argmax(1).numpy()
    np.testing.assert_array_equal(actor.act(OBS).actions, greedy)
    batch = {
        "obs": OBS,
        "next_obs": OBS[::-1].copy(),
        "actions": np.arange(8) % 2,
        "rewards": np.ones(8, np.float32),
        "dones": np.zeros(8, np.float32),
    }
    assert np.isfinite(learner.update(batch)["loss"])


def test_a_custom_network_unpickles_where_its_module_was_not_imported(tmp_path):
    """A snapshot of a learner, resumed in a new process run in the module's folder: the
    module is imported before the network's state is read."""
    net = build_net("custom_policy:make")
    (tmp_path / "net.pkl").write_bytes(pickle.dumps(net))
    shutil.copy(EXAMPLE, tmp_path / "custom_policy.py")
    code = (
        "import pickle, sys; n = pickle.load(open('net.pkl', 'rb')); "
        "print(type(n.module).__name__, n(__import__('torch').ones(1, 4))[1].item())"
    )
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    script = tmp_path / "load.py"
    script.write_text(code)
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    name, value = out.stdout.split()
    assert name == "TwoHeadedMLP" and float(value) == net(torch.ones(1, 4))[1].item()


# --------------------------------------------------------------------------- a program


@pytest.fixture(scope="session")  # not made again when another module runs between its tests
def launcher(tmp_path_factory) -> Path:
    return build(FIXTURES / "CustomPolicyPPO.lf", tmp_path_factory.mktemp("custom") / "out")


@pytest.fixture(scope="session")  # not made again when another module runs between its tests
def runs(launcher, tmp_path_factory) -> dict[int, Path]:
    """CustomPolicyPPO until a mean return of 100 (a random policy's is about 22; seed 1
    reaches it after 10,192 steps), on 1 and on 2 workers, each run in a
    folder that holds custom_policy.py (as a user runs it); their run directories."""
    out = {}
    for w in (1, 2):
        cwd = tmp_path_factory.mktemp(f"w{w}")
        shutil.copy(EXAMPLE, cwd / "custom_policy.py")
        args = ("-w", str(w), "--max_steps", "15000", "--target_return", "100")
        proc = subprocess.run(
            [str(launcher), *args], cwd=cwd, capture_output=True, text=True, timeout=150
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        (out[w],) = (cwd / "runs" / launcher.name).iterdir()
    return out


def test_a_program_learns_with_the_custom_network_on_any_worker_count(runs):
    one, two = runs[1], runs[2]
    assert (one / "returns.csv").read_bytes() == (two / "returns.csv").read_bytes()
    ckpt = torch.load(one / "model.pt", map_location="cpu", weights_only=True)
    assert ckpt["kind"] == "custom" and ckpt["spec"]["factory"] == "custom_policy:make"
    assert ckpt["spec"]["kwargs"] == {"hidden": 64}
    assert (
        json.loads((one / "config.json").read_text())["parameters"]["network"]
        == "custom_policy:make"
    )


def lf_rl_in(cwd: Path, monkeypatch, *args: str) -> tuple[int, str, str]:
    """``lf-rl ARGS`` in this process, run in ``cwd`` with only this process's import path."""
    monkeypatch.chdir(cwd)
    monkeypatch.delitem(sys.modules, "custom_policy", raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(EXAMPLE.parent)])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(args))
    return status, out.getvalue(), err.getvalue()


def test_eval_rebuilds_the_custom_network_and_plays(runs, monkeypatch):
    run_dir = runs[2]
    status, out, err = lf_rl_in(run_dir.parent.parent.parent, monkeypatch, "eval", str(run_dir))
    assert status == 0, err
    mean = float(out.split("mean return ")[1].split()[0])
    assert out.startswith("CartPole-v1: mean return ") and mean >= 100


def test_eval_without_the_module_says_so_in_one_line(runs, monkeypatch, tmp_path):
    status, out, err = lf_rl_in(tmp_path, monkeypatch, "eval", str(runs[1]), "--episodes", "1")
    assert status == 1 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(
        "lf-rl eval: error: cannot import module 'custom_policy' of network custom_policy:make"
    )
    assert str(tmp_path) in err and "PYTHONPATH" in err


def test_a_program_with_a_missing_network_module_stops_with_one_line(launcher, tmp_path):
    proc = subprocess.run(
        [str(launcher), "--network", "nowhere:make", "--max_steps", "100"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "cannot import module 'nowhere' of network nowhere:make" in proc.stderr


# --------------------------------------------------------------------------- SAC

SAC_NETS = {
    "network": "custom_policy:make_sac_actor",
    "critic_network": "custom_policy:make_sac_critic",
}


@pytest.mark.parametrize(
    ("factory", "role", "message"),
    [
        (
            "faulty_sac_nets:mean_only",
            "sac_actor",
            "forward(obs) on 2 observations must return (Gaussian mean, log_std): ((2, 1) "
            "float32, (2, 1) float32); it returned a (2, 1) float32 tensor",
        ),
        (
            "faulty_sac_nets:double_log_std",
            "sac_actor",
            "must return (Gaussian mean, log_std): ((2, 1) float32, (2, 1) float32); it "
            "returned (a (2, 1) float32 tensor, a (2, 1) float64 tensor)",
        ),
        (
            "faulty_sac_nets:q_column",
            "sac_critic",
            "forward(obs, action) on 2 observations and actions must return Q(s, a): (2,) "
            "float32; it returned a (2, 1) float32 tensor",
        ),
        (
            "faulty_sac_nets:state_only",
            "sac_critic",
            "forward(obs, action) failed on a (2, 3) float32 tensor observations and a (2, 1) "
            "float32 tensor actions: TypeError",
        ),
        ("faulty_nets:no_forward", "sac_critic", "NoForward has no forward(obs, action) method"),
    ],
)
def test_a_sac_network_missing_the_interface_is_named_on_one_line(factory, role, message):
    with pytest.raises(ConfigError) as e:
        build_net(factory, PENDULUM, role)
    text = str(e.value)
    assert text.startswith(f"network {factory}") and message in text and "\n" not in text


def test_sac_networks_need_a_box_action_space():
    for role, factory in (("sac_actor", "make_sac_actor"), ("sac_critic", "make_sac_critic")):
        with pytest.raises(ConfigError) as e:
            build_net(f"custom_policy:{factory}", CARTPOLE, role)
        assert str(e.value) == (
            f"network custom_policy:{factory}: SAC's {role[4:]} needs a Box (continuous) action "
            "space, not Discrete"
        )
    with pytest.raises(ConfigError, match="SAC's actor needs a Box"):
        custom_sac_actor("custom_policy:make_sac_actor", {}, CARTPOLE, torch.Generator())
    critic, kwargs = SAC_NETS["critic_network"], [32]
    bad = SACConfig(device="cpu", critic_network=critic, critic_network_kwargs=kwargs)
    with pytest.raises(ConfigError, match=r"^critic_network_kwargs must be a dict, not \[32\]"):
        SACLearner(bad, *PENDULUM, torch_seed=1)


def sac_learner(seed: int = 7, **nets: str) -> SACLearner:
    cfg = SACConfig(device="cpu", hidden=(8,), **(nets or SAC_NETS))
    cfg.network_kwargs = cfg.critic_network_kwargs = {"hidden": 16}
    return SACLearner(cfg, *PENDULUM, torch_seed=seed)


def states(net: torch.nn.Module) -> list[torch.Tensor]:
    return [t.detach().clone() for t in net.state_dict().values()]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def test_sac_initial_weights_depend_on_the_seed_and_each_critic_has_its_own():
    a, b, c = sac_learner(7), sac_learner(7), sac_learner(8)
    assert isinstance(a.actor, CustomSACActor) and isinstance(a.qf[0], CustomNetwork)
    for x, y in ((a.actor, b.actor), (a.qf[0], b.qf[0]), (a.qf[1], b.qf[1])):
        assert same(states(x), states(y))
    assert same(states(a.qf[0]), states(a.targets[0]))
    assert not same(states(a.qf[0]), states(a.qf[1]))  # twin critics, two draws
    assert not same(states(a.actor), states(c.actor))
    # either network custom on its own, the other built in
    only_critic = sac_learner(critic_network=SAC_NETS["critic_network"])
    only_actor = sac_learner(network=SAC_NETS["network"])
    assert isinstance(only_critic.actor, SquashedGaussianActor)
    assert isinstance(only_critic.qf[1], CustomNetwork)
    assert isinstance(only_actor.actor, CustomSACActor)
    assert isinstance(only_actor.qf[1], SoftQNetwork)


def sac_batch(rng: np.random.Generator, n: int = 16) -> dict:
    return {
        "obs": rng.standard_normal((n, 3)).astype(np.float32),
        "actions": rng.uniform(-2, 2, (n, 1)).astype(np.float32),
        "rewards": rng.standard_normal(n).astype(np.float32),
        "next_obs": rng.standard_normal((n, 3)).astype(np.float32),
        "dones": np.zeros(n, np.float32),
    }


def test_a_custom_sac_learner_updates_and_resumes_from_a_pickle():
    learner, rng = sac_learner(), np.random.default_rng(0)
    actor0, critic0, target0 = states(learner.actor), states(learner.qf[0]), learner.targets[0]
    stats = learner.update(sac_batch(rng))  # a critic step, then two policy steps
    assert all(np.isfinite(v) for v in stats.values()) and "actor_loss" in stats
    assert not same(actor0, states(learner.actor))
    assert not same(critic0, states(learner.qf[0]))
    assert learner.targets[0] is target0 and not same(critic0, states(target0))
    resumed = pickle.loads(pickle.dumps(learner))
    batch = sac_batch(rng)
    assert learner.update(batch) == resumed.update(batch)
    assert same(states(learner.actor), states(resumed.actor))


def test_the_sac_actor_and_eval_act_with_a_custom_policy():
    learner = sac_learner()
    weights = learner.weights()
    assert weights.kind == "custom_sac_actor" and learner.checkpoint()["kind"] == weights.kind
    obs = OBS[:, :3]
    warm = SACActor(np.random.default_rng(5), learning_starts=100)
    warm.load(weights)
    expected = np.random.default_rng(5).uniform(-2.0, 2.0, (8, 1)).astype(np.float32)
    np.testing.assert_array_equal(warm.act(obs).actions, expected)
    actor = SACActor(np.random.default_rng(5))
    actor.load(weights)
    assert isinstance(actor.net, CustomSACActor)
    assert np.array_equal(actor.net.action_bounds()[1], np.array([2.0], np.float32))
    noise = np.random.default_rng(5).standard_normal((8, 1)).astype(np.float32)
    with torch.no_grad():
        mean, log_std = (t.numpy() for t in learner.actor(torch.as_tensor(obs)))
    squashed = 2.0 * np.tanh(mean + np.exp(log_std) * noise)
    np.testing.assert_allclose(actor.act(obs).actions, squashed, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(greedy_action(actor.net, obs[0]), 2.0 * np.tanh(mean[0]), rtol=1e-6)


@pytest.fixture(scope="session")  # not made again when another module runs between its tests
def sac_launcher(tmp_path_factory) -> Path:
    return build(ROOT / "lf_src" / "PendulumSAC.lf", tmp_path_factory.mktemp("sac") / "out")


#: Two Pendulums of 25-step episodes until 20 episodes (500 steps), learning from step 100.
SAC_ARGS = (
    "--envs_per_member", "2", "--target_return", "-100000.0", "--learning_starts", "100",
    "--batch_size", "32", "--make_kwargs", '{= {"max_episode_steps": 25} =}',
    "--checkpoint_every", "0", "--learner.network", SAC_NETS["network"],
    "--learner.critic_network", SAC_NETS["critic_network"],
    "--learner.critic_network_kwargs", '{= {"hidden": 32} =}',
)  # fmt: skip


def run_sac(launcher: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """PendulumSAC with ``args`` in the new folder ``cwd``, which holds custom_policy.py."""
    cwd.mkdir()
    shutil.copy(EXAMPLE, cwd / "custom_policy.py")
    proc = subprocess.run(
        [str(launcher), "--digest", "run.digest", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def test_pendulum_sac_with_custom_networks_is_deterministic_resumes_and_evaluates(
    sac_launcher, tmp_path, monkeypatch
):
    """On 1 and 2 workers the same returns.csv, losses.csv and port values; a run resumed on
    2 workers from a snapshot taken on 1 gives the port values of the rest of the run (the
    networks unpickled in a new process, their module imported first); lf-rl eval plays the
    model's mean action."""
    snaps = tmp_path / "snaps"
    one = run_sac(sac_launcher, tmp_path / "w1", "-w", "1", *SAC_ARGS, "--checkpoint-every-tags",
                  "100", "--checkpoint-dir", str(snaps))  # fmt: skip
    assert "reached mean return -100000 over the last 20 episodes" in one.stdout
    run_sac(sac_launcher, tmp_path / "w2", "-w", "2", *SAC_ARGS)
    (d1,), (d2,) = ((tmp_path / w / "runs" / "PendulumSAC").iterdir() for w in ("w1", "w2"))
    for name in ("returns.csv", "losses.csv"):
        assert (d1 / name).read_bytes() == (d2 / name).read_bytes()
    full = (tmp_path / "w1" / "run.digest").read_text()
    assert full == (tmp_path / "w2" / "run.digest").read_text()
    first = sorted(snaps.glob("*.lfsnap"))[0]
    run_sac(sac_launcher, tmp_path / "resumed", "--resume", str(first), "-w", "2")
    after = (tmp_path / "resumed" / "run.digest").read_text().splitlines()
    start = tuple(map(int, after[0].split()[:2]))
    assert start[0] >= 100_000_000  # the snapshot's tag, not the start
    assert after == [ln for ln in full.splitlines() if tuple(map(int, ln.split()[:2])) >= start]
    ckpt = torch.load(d1 / "model.pt", map_location="cpu", weights_only=True)
    assert ckpt["kind"] == "custom_sac_actor" and ckpt["config"]["critic_network"]
    status, out, err = lf_rl_in(tmp_path / "w1", monkeypatch, "eval", str(d1), "--episodes", "2")
    assert status == 0, err
    assert out.startswith("Pendulum-v1: mean return ") and "over 2 episodes" in out
    assert json.loads((d1 / "eval.json").read_text())[-1]["lengths"] == [25, 25]
