"""Policy lag in logical time (rl_algos.lag): PPO's update overlaps acting, deterministically.

With ``--policy_lag k`` the learner's update on rollout i runs on a background thread while
the actors collect rollouts i+1 .. i+k; its weights reach the policy at the tag where
rollout i+k is complete. ``--policy_lag 0`` is the synchronous program of before, byte for
byte (compared with copies of the programs as they were, tests/lag_fixtures/). The programs
run on tiny budgets; the schedule is read from the port-value digest of a real run.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT, build, run_in_folder
from test_rl_resume import PPO, TWO, assert_killed_run_resumes, run_dir_in, start

from rl_algos.gae import compute_gae
from rl_algos.vtrace import compute_vtrace

MSEC = 1_000_000
FIXTURES = ROOT / "tests" / "lag_fixtures"
#: CartPolePPO: 8 environments, rollouts of 32 steps (256 transitions), 11 updates
CARTPOLE = ("--max_steps", "3000", "--checkpoint_every", "0")
#: per program, a budget of a few seconds (Atari: 2 updates of 32 steps of 8 games)
TINY = {
    "CartPolePPO": CARTPOLE,
    "PendulumPPO": ("--max_steps", "2000", "--num_steps", "64", "--checkpoint_every", "0"),
    "AtariPPO": ("--max_steps", "512", "--num_steps", "32", "--checkpoint_every", "0"),
}
RUN_FILES = ("returns.csv", "losses.csv")


@pytest.fixture(scope="module")
def launchers(tmp_path_factory) -> dict[str, Path]:
    """CartPolePPO, PendulumPPO and AtariPPO of lf_src/, built once."""
    out = tmp_path_factory.mktemp("lag")
    return {name: build(ROOT / "lf_src" / f"{name}.lf", out) for name in TINY}


def run(launcher: Path, cwd: Path, *args: str, status: int = 1) -> tuple[Path, str]:
    """The run directory and the digest of ``launcher`` run in ``cwd`` with ``args`` (at its
    tiny budget, unless ``args`` set another); checks its exit ``status``."""
    args = (*TINY[launcher.name], *args)
    proc, run_dir = run_in_folder(launcher, cwd, *args, "--digest", "run.digest", timeout=240)
    assert proc.returncode == status, proc.stderr[-3000:]
    return run_dir, (cwd / "run.digest").read_text()


def outputs(launcher: Path, cwd: Path, *args: str) -> dict[str, str]:
    """returns.csv, losses.csv and the digest of a run."""
    run_dir, digest = run(launcher, cwd, *args)
    return {**{f: (run_dir / f).read_text() for f in RUN_FILES}, "digest": digest}


def weights_tags(digest: str) -> list[int]:
    """The tags (ms) at which the learner sent weights, from a digest."""
    tags = {
        int(line.split(" ", 1)[0]) // MSEC
        for line in digest.splitlines()
        if ".learner.weights" in line
    }
    return sorted(tags)


def update_steps(run_dir: Path) -> list[int]:
    """The environment steps of the updates in losses.csv."""
    with open(run_dir / "losses.csv", newline="") as f:
        return sorted({int(r["step"]) for r in csv.DictReader(f)})


# ------------------------------------------------------------------ lag 0: today's program


@pytest.mark.parametrize(
    "name",
    # AtariPPO's (15 s) with the slow tests: the same learner and lag code as the other two
    [n if n != "AtariPPO" else pytest.param(n, marks=pytest.mark.slow) for n in TINY],
)
def test_lag_0_computes_what_the_program_did_before(launchers, tmp_path, name):
    before = build(FIXTURES / f"{name}.lf", tmp_path / "before")
    old = outputs(before, tmp_path / "old")
    new = outputs(launchers[name], tmp_path / "new", "--policy_lag", "0")
    for what in old:
        assert new[what] == old[what], f"{name}: {what} differs with --policy_lag 0"


# ------------------------------------------------------------------ the schedule


def test_weights_of_a_lagged_update_arrive_k_rollouts_later(launchers, tmp_path):
    cartpole = launchers["CartPolePPO"]
    sync_dir, sync = run(cartpole, tmp_path / "k0")
    lag_dir, lagged = run(cartpole, tmp_path / "k1", "--policy_lag", "1")
    # rollout i is complete at tag 32 * (i + 1) ms: synchronous weights leave then, lagged
    # ones one rollout later (the first rollouts acted with the initial weights)
    assert weights_tags(sync)[:4] == [0, 32, 64, 96]
    assert weights_tags(lagged)[:4] == [0, 64, 96, 128]
    assert len(weights_tags(lagged)) == len(weights_tags(sync)) - 1
    # the same rollouts were trained on: the stop joined the update still running
    assert update_steps(lag_dir) == update_steps(sync_dir)
    assert (lag_dir / "returns.csv").read_text() != (sync_dir / "returns.csv").read_text()


def test_a_lagged_run_is_the_same_on_any_workers_and_backend(launchers, tmp_path):
    cartpole, args = launchers["CartPolePPO"], ("--policy_lag", "1")
    one = outputs(cartpole, tmp_path / "w1", *args, "-w", "1")
    two = outputs(cartpole, tmp_path / "w2", *args, "-w", "2")
    threads = outputs(cartpole, tmp_path / "t2", *args, "-w", "2", "--backend", "threads")
    assert one == two == threads


def test_a_lagged_atari_run_is_the_same_on_one_and_two_workers(launchers, tmp_path):
    atari, args = launchers["AtariPPO"], ("--policy_lag", "1")
    one = outputs(atari, tmp_path / "w1", *args, "-w", "1")
    assert one == outputs(atari, tmp_path / "w2", *args, "-w", "2")


def test_lag_and_vtrace_with_environment_groups_are_deterministic(launchers, tmp_path):
    cartpole = launchers["CartPolePPO"]
    args = ("--policy_lag", "2", "--off_policy", "vtrace", "--env_groups", "2")
    one = outputs(cartpole, tmp_path / "w1", *args, "-w", "1")
    assert one == outputs(cartpole, tmp_path / "w2", *args, "-w", "2")
    assert weights_tags(one["digest"])[:3] == [0, 192, 256]  # 64-tag rollouts, lag 2


def test_a_killed_lagged_run_resumes_to_the_same_files(tmp_path):
    # snapshots after every update: each one waits for the update started at its tag
    assert_killed_run_resumes("CartPolePPO", (*PPO, "--policy_lag", "1"), TWO, 5, tmp_path)


def test_ctrl_c_joins_the_pending_update_into_the_model_and_the_losses(launchers, tmp_path):
    cwd = tmp_path / "run"
    args = ("--max_steps", "300000", "--policy_lag", "1", "-w", "2")
    proc = start(launchers["CartPolePPO"], cwd, *args)
    deadline = time.monotonic() + 120
    while not list(cwd.glob("runs/*/*/checkpoints/*.lfsnap")) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it was stopped"
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=60) == 130, (cwd / "stderr.txt").read_text()[-2000:]
    finally:
        proc.kill()
    run_dir = run_dir_in(cwd, "CartPolePPO")
    # every update started was finished: in model.pt and with its row of losses
    model = torch.load(run_dir / "model.pt")
    assert model["updates"] == len(update_steps(run_dir)) > 0
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"lf{proc.pid}x")]


def test_cartpole_with_a_lag_of_1_still_solves(launchers, tmp_path):
    args = ("--max_steps", "50000", "--policy_lag", "1", "--seed", "1", "--checkpoint_every", "0")
    proc, run_dir = run_in_folder(launchers["CartPolePPO"], tmp_path / "solve", *args, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "reached mean return 475" in proc.stdout + proc.stderr


# ------------------------------------------------------------------ failures and the trace


def test_a_failing_background_update_is_reported_as_its_reaction(launchers, tmp_path):
    args = ("--policy_lag", "1", "--minibatch_size", "0", "-w", "2")
    cwd = tmp_path / "fail"
    proc = start(launchers["CartPolePPO"], cwd, *CARTPOLE, *args)
    try:
        assert proc.wait(timeout=240) == 1
    finally:
        proc.kill()
    err = (cwd / "stderr.txt").read_text()
    run_dir = run_dir_in(cwd, "CartPolePPO")
    assert re.search(r"reaction \d of CartPolePPO\.learner failed at .*lib/PPO\.lf:\d+", err), err
    assert "range() arg 3 must not be zero" in err and "background update" in err, err
    assert "could not save" not in err, err  # model.pt of what was trained
    assert (run_dir / "model.pt").exists()
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"lf{proc.pid}x")]


def test_bad_lag_settings_are_one_line_errors(launchers, tmp_path):
    for args, text in ((("--policy_lag", "-1"), "policy_lag = -1"),
                       (("--off_policy", "gae"), "off_policy = 'gae'")):  # fmt: skip
        proc, _ = run_in_folder(launchers["CartPolePPO"], tmp_path / args[1], *CARTPOLE, *args)
        assert proc.returncode != 0 and text in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr


def test_the_trace_shows_the_update_beside_the_tags(tmp_path):
    source = (ROOT / "lf_src" / "CartPolePPO.lf").read_text()
    source = source.replace("{ fast: true }", "{ fast: true, tracing: true }")
    source = source.replace('from "lib/', f'from "{ROOT}/lf_src/lib/')
    (tmp_path / "CartPolePPO.lf").write_text(source)
    launcher = build(tmp_path / "CartPolePPO.lf", tmp_path / "build")
    proc, _ = run_in_folder(launcher, tmp_path / "w", *CARTPOLE, "--policy_lag", "1", "-w", "2")
    assert proc.returncode == 1, proc.stderr[-2000:]
    events = json.loads((tmp_path / "w" / "CartPolePPO.trace.json").read_text())["traceEvents"]
    updates = [e for e in events if "(background)" in e["name"]]
    assert len(updates) == 11 and {e["tid"] for e in updates} == {1}, updates
    rows = defaultdict(list)
    for e in events:
        if e["tid"] == 0:
            rows[e["pid"]].append((e["ts"], e["ts"] + e["dur"]))
    # while an update ran, both workers went on running reactions (the next rollout)
    for u in updates[:-1]:
        start, end = u["ts"], u["ts"] + u["dur"]
        for pid, spans in rows.items():
            assert any(start < a and b < end for a, b in spans), (pid, u)


# ------------------------------------------------------------------ V-trace


def test_vtrace_on_policy_gives_the_gae_returns():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(7, 3)), rng.normal(size=(7, 3))
    d, last = rng.random((7, 3)) < 0.2, rng.normal(size=3)
    _, ret = compute_gae(r, v, d, last, 0.9, 0.8)
    adv, targets = compute_vtrace(r, v, d, last, np.zeros((7, 3)), 0.9, 0.8)
    np.testing.assert_allclose(targets, ret, rtol=1e-6)
    # the advantage of eq. 4 bootstraps from the next target
    np.testing.assert_allclose(
        adv[:-1], r[:-1] + 0.9 * ~d[:-1] * targets[1:] - v[:-1], rtol=1e-5, atol=1e-6
    )


def test_vtrace_truncates_the_importance_weights():
    r, v, d = np.ones((1, 2)), np.zeros((1, 2)), np.zeros((1, 2), bool)
    last = np.ones(2)
    # pi / mu = e^2 is truncated to 1; e^-1 is kept
    _, targets = compute_vtrace(r, v, d, last, np.array([[2.0, -1.0]]), 0.5, 1.0)
    np.testing.assert_allclose(targets, [[1.5, 1.5 * np.exp(-1)]], rtol=1e-6)
