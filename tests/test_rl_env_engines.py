"""The engines that step an environment group (rl_algos.env_engines, GymEnv's `engine`).

gymnasium's SyncVectorEnv and AsyncVectorEnv, with same-step autoreset, must give the loop's
EnvSteps bit for bit (compared as pickles, as the port digests compare them), also in a
program on two workers. EnvPool and ale-py's AtariVectorEnv run their own games: their
EnvSteps must have the loop's shapes, dtypes and episode bookkeeping, and the documented
differences (docs/environments.md) are checked where they are exact. Mistakes are one-line
ConfigErrors naming the valid choices.
"""

from __future__ import annotations

import importlib.util
import json
import pickle
import sys

import gymnasium as gym
import numpy as np
import pytest
from conftest import ROOT, build, run_in_folder, run_program

from rl_algos.config import ConfigError
from rl_algos.envs import EnvGroup, EnvStep

FIXTURES = ROOT / "tests" / "engine_fixtures"
GYMNASIUM = ("gymnasium-sync", "gymnasium-async")


def needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")


def random_actions(group: EnvGroup, n: int, seed: int = 5) -> list[np.ndarray]:
    """``n`` rounds of random actions for the group's space (Discrete or Box)."""
    rng, space = np.random.default_rng(seed), group.action_space
    if isinstance(space, gym.spaces.Discrete):
        return [rng.integers(int(space.n), size=group.k) for _ in range(n)]
    assert isinstance(space, gym.spaces.Box)
    shape = (group.k, *space.shape)
    return [(3 * rng.normal(size=shape)).astype(np.float32) for _ in range(n)]


def play(env_id: str, engine: str, n: int, k: int = 4, **kwargs) -> list[EnvStep]:
    """The reset and ``n`` steps of a group of ``k`` seeded from generator 1."""
    group = EnvGroup(env_id, k, np.random.default_rng(1), engine=engine, **kwargs)
    try:
        steps = [group.reset()]
        steps += [group.step(a) for a in random_actions(group, n)]
        return steps
    finally:
        group.close()


def pickled(steps: list[EnvStep]) -> list[bytes]:
    return [pickle.dumps(s) for s in steps]


# --------------------------------------------------------------------------- gymnasium engines


@pytest.mark.parametrize(
    "env_id, n", [("CartPole-v1", 300), ("Pendulum-v1", 230)], ids=["discrete", "box"]
)
def test_gymnasium_vector_envs_give_the_loop_steps_bit_for_bit(env_id, n):
    reference = play(env_id, "loop", n)
    assert sum(len(s.episodes) for s in reference) >= 4  # episode ends are compared too
    for engine in GYMNASIUM:
        assert pickled(play(env_id, engine, n)) == pickled(reference), engine


def test_atari_through_gymnasium_sync_is_the_loop_bit_for_bit():
    needs("ale_py")
    kwargs = {"max_num_frames_per_episode": 160}  # episodes of about 40 steps
    reference = play("ALE/Pong-v5", "loop", 50, k=2, **kwargs)
    assert len([e for s in reference for e in s.episodes]) == 2
    assert pickled(play("ALE/Pong-v5", "gymnasium-sync", 50, k=2, **kwargs)) == pickled(reference)


def test_a_sync_group_unpickled_goes_on_as_the_original():
    group = EnvGroup("CartPole-v1", 3, np.random.default_rng(2), engine="gymnasium-sync")
    group.reset()
    actions = random_actions(group, 150)
    for a in actions[:50]:
        group.step(a)
    copy = pickle.loads(pickle.dumps(group))
    for a in actions[50:]:  # the same bytes: a resumed run's digests are the run's
        assert pickle.dumps(copy.step(a)) == pickle.dumps(group.step(a))


@pytest.mark.parametrize("engine", ["gymnasium-async", "envpool"])
def test_engines_outside_python_refuse_a_checkpoint(engine):
    needs(engine.split("-")[0])
    group = EnvGroup("CartPole-v1", 2, np.random.default_rng(0), engine=engine)
    try:
        with pytest.raises(TypeError, match="checkpoints need engine 'loop' or 'gymnasium-sync'"):
            pickle.dumps(group)
    finally:
        group.close()


# --------------------------------------------------------------------------- C++ pools


def check_bookkeeping(steps: list[EnvStep], k: int, obs_shape: tuple, obs_dtype) -> list:
    """Shapes and dtypes of every EnvStep, and episodes whose return and length are the sums
    of the rewards and steps of their environment since its last end; the episodes."""
    ret, length, episodes = np.zeros(k), np.zeros(k, int), []
    for i, s in enumerate(steps):
        assert s.obs.shape == (k, *obs_shape) and s.obs.dtype == obs_dtype
        assert s.reward.shape == (k,) and s.reward.dtype == np.float32
        assert s.terminated.dtype == s.truncated.dtype == np.bool_
        assert s.steps == i * k
        ret, length = ret + s.reward, length + (i > 0)
        assert [e.env for e in s.episodes] == list(np.flatnonzero(s.done))
        assert (s.final_obs is None) == (not s.done.any())
        for e in s.episodes:
            assert (e.ret, e.length) == (pytest.approx(ret[e.env]), length[e.env])
            ret[e.env], length[e.env] = 0.0, 0
        episodes += s.episodes
    return episodes


def test_envpool_cartpole_steps_are_the_loops_kind():
    needs("envpool")
    steps = play("CartPole-v1", "envpool", 300)
    assert len(check_bookkeeping(steps, 4, (4,), np.float32)) >= 10
    for s in steps[1:]:
        for i in np.flatnonzero(s.done):
            # the finished episode's last observation, out of bounds; a new one in its place
            x, theta = s.final_obs[i, 0], s.final_obs[i, 2]
            assert s.terminated[i] and (abs(x) > 2.4 or abs(theta) > 0.2094)
            assert np.all(np.abs(s.obs[i]) <= 0.05)
    again = play("CartPole-v1", "envpool", 300)
    assert pickled(again) == pickled(steps)  # seeded from the group's generator
    assert pickled(play("CartPole-v1", "loop", 300)) != pickled(steps)  # its own games


def test_ale_vector_has_the_loops_frames_but_pads_a_new_stack_with_black():
    """With no-op starts and sticky actions off, the newest frame of every observation and
    every reward equal the loop's; the first observation of an episode stacks three black
    frames before it where gymnasium repeats it."""
    needs("ale_py")
    kwargs = dict(noop_max=0, repeat_action_probability=0.0, max_num_frames_per_episode=160)
    loop = play("ALE/Pong-v5", "loop", 50, k=2, **kwargs)
    vec = play("ALE/Pong-v5", "ale-vector", 50, k=2, **kwargs)
    assert [e.length for e in check_bookkeeping(vec, 2, (4, 84, 84), np.uint8)] == [40, 40]
    for a, b in zip(loop, vec):
        assert np.array_equal(a.obs[:, -1], b.obs[:, -1]) and np.array_equal(a.reward, b.reward)
    first = vec[40].obs  # the episodes end at step 40: a new episode's first stack
    assert vec[40].done.all() and not first[:, :3].any() and first[:, 3].any()
    assert np.array_equal(loop[40].obs[:, 0], loop[40].obs[:, 3])


def test_envpool_atari_steps_are_the_loops_kind():
    needs("envpool")
    steps = play("ALE/Pong-v5", "envpool", 45, k=2, max_num_frames_per_episode=160)
    assert [e.length for e in check_bookkeeping(steps, 2, (4, 84, 84), np.uint8)] == [40, 40]


# --------------------------------------------------------------------------- mistakes


@pytest.mark.parametrize(
    "engine, env_id, kwargs, message",
    [
        ("envpol", "CartPole-v1", {}, "unknown engine 'envpol'; valid: loop, gymnasium-sync, "),
        ("ale-vector", "CartPole-v1", {}, "steps Atari games only"),
        ("envpool", "corridor:Corridor-v0", {}, "envpool has no environment 'corridor:"),
        ("envpool", "CartPole-v1", {"wrappers": ["ClipAction"]}, "cannot take wrappers"),
        ("ale-vector", "ALE/Pong-v5", {"obs_type": "rgb"}, r"make_kwargs \['obs_type'\] are"),
        ("envpool", "ALE/Pong-v5", {"noop_max": 0}, "needs noop_max >= 1"),
    ],
)
def test_a_wrong_engine_choice_is_a_one_line_error(engine, env_id, kwargs, message):
    needs("envpool")
    needs("ale_py")
    wrappers = kwargs.pop("wrappers", ())
    with pytest.raises(ConfigError, match=message):
        EnvGroup(env_id, 2, np.random.default_rng(0), wrappers, engine=engine, **kwargs)


def test_envpool_missing_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool raises ImportError
    with pytest.raises(ConfigError, match=r"needs the envpool package \(pip install envpool\)"):
        EnvGroup("CartPole-v1", 2, np.random.default_rng(0), engine="envpool")


# --------------------------------------------------------------------------- programs


def test_a_program_gives_the_same_returns_with_the_async_engine_on_two_workers(tmp_path):
    """GymEnv's `engine` in a PPO program: gymnasium-async (its environment processes
    started by daemonic workers) writes the loop's returns.csv."""
    launcher = build(FIXTURES / "EngineCartPolePPO.lf", tmp_path / "out")
    tiny = ("--max_steps", "800", "--num_steps", "8", "--minibatch_size", "32")
    (p1, d1), (p2, d2) = (
        run_in_folder(launcher, tmp_path / name, *tiny, *args, timeout=120)
        for name, args in (("loop", ()), ("async", ("--engine", "gymnasium-async", "-w", "2")))
    )
    for p in (p1, p2):
        assert "stopped at its step budget" in p.stderr, p.stderr[-2000:]
    assert (d1 / "returns.csv").read_bytes() == (d2 / "returns.csv").read_bytes()


def test_the_bench_program_runs_each_engine(tmp_path):
    launcher = build(ROOT / "lf_src" / "bench" / "EngineSim.lf", tmp_path / "out")
    results = {}
    pools = ("envpool",) if importlib.util.find_spec("envpool") else ()  # the bench extra's
    for engine in ("loop", "gymnasium-sync", *pools):
        r = run_program(launcher, "--rounds", "40", "--k", "4", "--engine", engine)
        assert r.returncode == 0, r.stderr[-2000:]
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
        results[engine] = json.loads(line[len("RESULT ") :])
    assert results["loop"]["envs"] == 4 and results["loop"]["episodes"] > 0
    same = ("reward", "obs_sum", "episodes")
    assert [results["gymnasium-sync"][k] for k in same] == [results["loop"][k] for k in same]
    if pools:
        assert results["envpool"]["obs_sum"] != results["loop"]["obs_sum"]
