"""A user's torch module as the network of the library's learners (rl_algos.custom_network):
the interface checked when the network is built, each mistake named on one line; a PPO or
DQN learner and its actor built from the factory act as their weights say; a program whose
PPOLearner gets ``network = "custom_policy:make"`` (examples/custom_policy.py) learns, gives
the same returns.csv on 1 and 2 workers, and ``lf-rl eval`` plays its model, or says in one
line that the module cannot be imported."""

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
from rl_algos.distributions import log_softmax, sample_categorical
from rl_algos.dqn import DQNActor, DQNConfig, DQNLearner
from rl_algos.networks import ActorCritic, GaussianActorCritic, QNetwork
from rl_algos.ppo import PPOActor, PPOConfig, PPOLearner

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
