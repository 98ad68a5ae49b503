"""A signal that stops a run (Ctrl-C, SIGTERM, SIGHUP) and the work in progress: a long
reaction that polls ``lf.stop_signalled()`` returns at once, so the run ends within a second of
the signal on every backend, with status 130 and its shutdown reactions run; a Ctrl-C to the
whole process group while the workers still import the program ends the run at once, without
tracebacks; a PPO update asked to stop ends after the minibatch in progress.

The time bounds are generous: the fixture's run ends in about 0.05 s after the signal on an
idle machine (0.25 s before its first tag, where the workers are forced out after 0.2 s); the
bound of one second leaves room for a loaded CI machine."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import build, child_pids

HERE = Path(__file__).resolve().parent
LONG = HERE / "fault_fixtures" / "LongReaction.lf"
BACKENDS = [("1", "processes"), ("2", "processes"), ("2", "threads")]
SAID = "---- Interrupted (Ctrl-C); stopping."
BOUND_S = 1.0  # signal to exit (see the module's docstring)


@pytest.fixture(scope="module")
def long_reaction(tmp_path_factory):
    return build(LONG, tmp_path_factory.mktemp("long"))


def _start(launcher: Path, *args: str, **env: str) -> subprocess.Popen:
    """``launcher`` in a process group of its own (a Ctrl-C reaches the whole group), with
    SIGINT handled as from a terminal (a background job would pass it on ignored)."""
    return subprocess.Popen(
        [str(launcher), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1", **env),
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _ctrl_c(p: subprocess.Popen) -> tuple[float, str, str]:
    """SIGINT to the process group of ``p``, as a terminal's Ctrl-C; the seconds until it
    exited, its stdout and its stderr."""
    t0 = time.monotonic()
    os.killpg(p.pid, signal.SIGINT)
    try:
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    return time.monotonic() - t0, out, err


def _gone(pids: set[int], within_s: float = 5.0) -> bool:
    """Whether every process of ``pids`` has ended (within ``within_s`` seconds: spawn's
    resource helper ends when it reads the end of its pipe)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(os.path.exists(f"/proc/{p}") for p in pids):
            return True
        time.sleep(0.05)
    return False


def _segments(pid: int) -> list[str]:
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"lf{pid}x")]


@pytest.mark.parametrize("workers,backend", BACKENDS)
def test_a_long_reaction_polling_the_flag_ends_the_run_within_a_second(
    long_reaction, workers, backend
):
    p = _start(long_reaction, "-w", workers, "--backend", backend)
    assert p.stdout.readline().endswith("computes\n")
    time.sleep(0.2)  # inside the long computation
    took, out, err = _ctrl_c(p)
    assert p.returncode == 130, err
    assert took < BOUND_S, (took, out, err)
    assert err.count(SAID) == 1 and "Traceback" not in err and "ERROR" not in err, err
    assert out.count("signalled: True\n") == 2, out  # both shutdown reactions ran and saw it
    assert "cut short: True" in out, out
    assert not _segments(p.pid)


@pytest.mark.parametrize("workers,backend", BACKENDS)
def test_the_flag_stays_false_without_a_signal(long_reaction, workers, backend):
    p = _start(long_reaction, "-w", workers, "--backend", backend, LONG_S="0.05")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert out.count("cut short: False, signalled: False\n") == 2, out


def test_ctrl_c_while_the_workers_import_the_program_ends_at_once(long_reaction):
    p = _start(long_reaction, "-w", "2", SLOW_IMPORT="60")
    said = ""
    while said.count("worker importing") < 2:  # both workers are inside their import
        line = p.stderr.readline()
        assert line, said
        said += line
    children = child_pids(p.pid)
    took, out, err = _ctrl_c(p)
    assert p.returncode == 130, err
    assert took < BOUND_S, (took, err)
    assert err.count(SAID) == 1, err
    assert "Traceback" not in err and "killed by signal" not in err and "ERROR" not in err, err
    assert _gone(children), children
    assert not _segments(p.pid)


# --------------------------------------------------------------------------- a PPO update


def _update_with(stop, monkeypatch) -> tuple[int, dict]:
    """One PPO update of a short CartPole rollout with ``stop``: the minibatches it made and
    its statistics."""
    pytest.importorskip("torch")
    from rl_algos.envs import EnvGroup
    from rl_algos.ppo import PPOActor, PPOConfig, PPOLearner

    group = EnvGroup("CartPole-v1", 2, np.random.default_rng(0))
    cfg = PPOConfig(num_steps=8, minibatch_size=4, update_epochs=3, device="cpu")
    learner = PPOLearner(
        cfg, group.observation_space, group.action_space, np.random.default_rng(1), 7
    )
    done = []
    minibatch = learner._minibatch
    monkeypatch.setattr(learner, "_minibatch", lambda *a: done.append(1) or minibatch(*a))
    actor = PPOActor(np.random.default_rng(2))
    actor.load(learner.weights())
    steps, record = [group.reset()], None
    for _ in range(cfg.num_steps + 1):
        learner.observe(steps, record, stop)
        record = actor.act(steps[0].obs)
        steps = [group.step(record.actions)]
    assert learner.updates == 1
    return len(done), learner.stats


def test_a_ppo_update_asked_to_stop_ends_after_the_minibatch_in_progress(monkeypatch):
    full, _ = _update_with(lambda: False, monkeypatch)
    assert full == 3 * (8 * 2 // 4)  # epochs x minibatches of the 16 transitions
    asked: list[int] = []
    cut, stats = _update_with(lambda: asked.append(1) or len(asked) >= 2, monkeypatch)
    assert cut == 2  # asked after each minibatch: yes after the second
    assert all(np.isfinite(v) for v in stats.values()), stats
