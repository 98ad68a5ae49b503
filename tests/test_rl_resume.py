"""RL runs checkpoint by default and resume from their run directory (lf_src/CartPolePPO.lf,
lf_src/CartPoleDQN.lf; the main reactor's ``lf_checkpoint_policy``, rl_algos' restorable logs).

A run killed with SIGKILL at a random point after its first checkpoint, then resumed with
``--resume <run dir>`` (and no other option: the parameters come from the snapshot), ends with
the same returns.csv, byte for byte, as an uninterrupted run with the same seed; for PPO also
losses.csv, for DQN with its replay buffer in the snapshot. The PPO run is killed on two
worker processes and resumed on one. A run stopped by SIGTERM still writes model.pt and
learning_curve.png. The kill points come from a seeded generator (printed on failure). The
logs and the salvage of a stopped run survive a pickle round trip as a resumed run needs.
"""

from __future__ import annotations

import functools
import os
import pickle
import random
import signal
import subprocess
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import ROOT, build

from reactors.records import snapshot_file, snapshot_runs
from rl_algos import salvage
from rl_algos.device import configure_torch
from rl_algos.evaluate import load_policy
from rl_algos.metrics import ScalarLog
from rl_algos.modelfile import save_model
from rl_algos.ppo import PPOConfig, PPOLearner
from rl_algos.runlog import EpisodeLog

LF_SRC = ROOT / "lf_src"
#: Small runs (a few seconds each), a snapshot every update (PPO) or every 20 tags (DQN).
PPO = ("--max_steps", "2400", "--checkpoint_every", "1")  # 9 snapshots
DQN = ("--max_steps", "1200", "--learning_starts", "200", "--buffer_size", "1000")
DQN += (
    "--checkpoint-every-tags",
    "20",
)  # 14 snapshots in the run directory; learning from the 3rd on
ONE, TWO = ("-w", "1"), ("-w", "2", "--backend", "processes")
KILLS = random.Random(20261123)
#: The files of a run that must end byte for byte as the uninterrupted run's.
COMPARED = {
    "CartPolePPO": ("returns.csv", "losses.csv"),
    "CartPoleDQN": ("returns.csv", "losses.csv"),
}


def launcher_of(name: str, out: Path) -> Path:
    return build(LF_SRC / f"{name}.lf", out / "build")


def run_dir_in(cwd: Path, program: str) -> Path:
    runs = sorted((cwd / "runs" / program).iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def start(launcher: Path, cwd: Path, *args: str) -> subprocess.Popen:
    """Start the program in ``cwd`` (its own session, so that a kill reaches its workers)."""
    cwd.mkdir(parents=True, exist_ok=True)
    with open(cwd / "stderr.txt", "w") as err:  # the child keeps its own copy
        return subprocess.Popen(
            [str(launcher), *args],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
            start_new_session=True,
        )


def finish(proc: subprocess.Popen, cwd: Path) -> int:
    """Wait for the run; its exit status (1: the target return was missed, as planned)."""
    try:
        status = proc.wait(timeout=240)
    finally:
        proc.kill()
    assert status in (0, 1), f"exit {status}\n{(cwd / 'stderr.txt').read_text()[-3000:]}"
    return status


def newest_tags(folder: Path) -> int:
    """Tags counted by the newest snapshot in ``folder`` (0: none yet)."""
    names = [p.name for p in folder.glob(f"*{snapshot_file.SUFFIX}")]
    return max((int(n.split(".")[-2]) for n in names), default=0)


def kill_after(proc: subprocess.Popen, cwd: Path, program: str, tags: int, delay: float) -> None:
    """SIGKILL the run's process group ``delay`` seconds after a snapshot of ``tags`` tags or
    more appeared, and remove the shared memory its workers left."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        runs = list((cwd / "runs" / program).glob("*/checkpoints"))
        if runs and newest_tags(runs[0]) >= tags:
            break
        time.sleep(0.005)
    time.sleep(delay)
    assert proc.poll() is None, "the run ended before it was killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for name in os.listdir("/dev/shm"):
        if name.startswith(f"lf{proc.pid}x"):
            os.unlink(f"/dev/shm/{name}")


def uninterrupted(name: str, args: tuple[str, ...], out: Path) -> tuple[Path, Path]:
    """Build and run ``name`` without a stop; the launcher and the run directory."""
    launcher = launcher_of(name, out)
    cwd = out / "whole"
    finish(start(launcher, cwd, *args, *ONE), cwd)
    return launcher, run_dir_in(cwd, name)


def assert_killed_run_resumes(
    name: str, args: tuple[str, ...], workers: tuple[str, ...], snapshots: int, out: Path
) -> None:
    """Kill a run of ``name`` (``args`` on ``workers``) after a random snapshot among the
    first ``snapshots``, resume it on one worker from its run directory alone, and compare
    its files with the uninterrupted run's."""
    launcher, whole = uninterrupted(name, args, out)
    tags = KILLS.randint(1, snapshots) * _period(whole)
    delay = KILLS.uniform(0, 0.05)
    where = f"{name} killed after {tags} tags + {delay * 1000:.0f} ms on {' '.join(workers)}"
    cwd = out / "killed"
    kill_after(start(launcher, cwd, *args, *workers), cwd, name, tags, delay)
    run_dir = run_dir_in(cwd, name)
    resumed_from = snapshot_file.newest(str(run_dir))
    assert resumed_from.startswith(str(run_dir / "checkpoints")), where
    again = out / "resumed"  # another directory: the run goes on in its own
    finish(start(launcher, again, "--resume", str(run_dir), *ONE), again)
    assert not (again / "runs").exists() and not (again / "checkpoints").exists(), where
    for file in (*COMPARED[name], "model.pt"):
        ours, theirs = (run_dir / file).read_bytes(), (whole / file).read_bytes()
        assert ours == theirs, f"{where}, resumed from {resumed_from}: {file} differs"
    assert (run_dir / "learning_curve.png").exists()
    run = run_dir.name.rsplit("-", 1)[1]
    taken = sorted((run_dir / "checkpoints").glob("*.lfsnap"))
    assert {p.name.split(".")[1] for p in taken} == {run}, f"{where}: {taken}"
    assert newest_tags(run_dir / "checkpoints") == newest_tags(whole / "checkpoints"), (
        f"{where}: the resumed run did not go on taking snapshots"
    )


def _period(run_dir: Path) -> int:
    """Tags between two snapshots of a finished run (from its last two kept snapshots)."""
    tags = sorted(int(p.name.split(".")[-2]) for p in (run_dir / "checkpoints").glob("*.lfsnap"))
    assert len(tags) >= 2, tags
    return tags[-1] - tags[-2]


def test_killed_ppo_run_on_two_workers_resumes_on_one(tmp_path):
    assert_killed_run_resumes("CartPolePPO", PPO, TWO, 5, tmp_path)


def test_killed_dqn_run_resumes_with_its_replay_buffer(tmp_path):
    assert_killed_run_resumes("CartPoleDQN", DQN, ONE, 9, tmp_path)
    run_dir = run_dir_in(tmp_path / "killed", "CartPoleDQN")
    launcher = tmp_path / "build" / "bin" / "CartPoleDQN"
    again = subprocess.run(
        [str(launcher), "--resume", str(run_dir)], capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 1 and not again.stdout, again.stderr
    assert len(again.stderr.splitlines()) == 1 and "finished" in again.stderr, again.stderr


def test_sigterm_still_writes_the_model_and_the_learning_curve(tmp_path):
    launcher = launcher_of("CartPolePPO", tmp_path)
    cwd = tmp_path / "run"
    proc = start(launcher, cwd, *PPO)
    kill = time.monotonic() + 240
    while not list(cwd.glob("runs/*/*/checkpoints/*.lfsnap")) and time.monotonic() < kill:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it was stopped"
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=120) == 143
    finally:
        proc.kill()
    run_dir = run_dir_in(cwd, "CartPolePPO")
    assert torch.load(run_dir / "model.pt")["env_steps"] > 0
    run_id = (run_dir / ".run_id").read_text().strip()
    assert snapshot_runs.finished(str(run_dir / "checkpoints"), "CartPolePPO", run_id) is None
    assert (run_dir / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_model_file_is_the_same_for_an_unpickled_learner_and_old_files_load(tmp_path):
    """A learner restored from a snapshot (unpickled) saves its model.pt with the same bytes
    as the learner it was saved from; a model.pt written before (``torch.save`` of the
    checkpoint as it is) still loads as ``lf-rl eval`` loads it."""
    configure_torch()
    spaces = gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2)
    agent = PPOLearner(PPOConfig(), *spaces, np.random.default_rng(1), 3)
    restored = pickle.loads(pickle.dumps(agent))
    paths = []
    for i, learner in enumerate((agent, restored)):
        (tmp_path / str(i)).mkdir()
        paths.append(save_model(learner, "CartPole-v1", str(tmp_path / str(i) / "model.pt")))
    first, second = (Path(p).read_bytes() for p in paths)
    assert first == second
    old = tmp_path / "old.pt"
    torch.save(dict(agent.checkpoint(), env_id="CartPole-v1"), old)
    x = torch.zeros(1, 4)
    for path in (paths[1], str(old)):
        net, env_id, _ = load_policy(path)
        assert env_id == "CartPole-v1"
        assert torch.equal(net(x)[0], agent.net(x)[0])


def test_logs_restored_cut_their_files_back_and_go_on(tmp_path):
    log = EpisodeLog(str(tmp_path / "returns.csv"))
    scalars = ScalarLog(str(tmp_path), "metrics.csv", tensorboard=False)
    log.add(8, 12.0, 12, 0)
    scalars.add("charts/SPS", 1.5, 8)
    saved = pickle.dumps((log, scalars))
    log.add(16, 20.0, 20, 1)  # written after the snapshot: gone on resume
    scalars.add("charts/SPS", 2.5, 16)
    log2, scalars2 = pickle.loads(saved)
    log2.add(24, 30.0, 30, 1)
    scalars2.add("charts/SPS", 3.5, 24)
    log2.close()
    scalars2.close()
    assert (tmp_path / "returns.csv").read_text().splitlines()[1:] == [
        "1,8,12,12,0",
        "2,24,30,30,1",
    ]
    assert (tmp_path / "metrics.csv").read_text().splitlines()[1:] == [
        "8,charts/SPS,1.5",
        "24,charts/SPS,3.5",
    ]
    assert log2.returns == [12.0, 30.0]


def test_a_salvage_is_saved_with_its_function_and_registered_again(tmp_path):
    path = tmp_path / "saved.txt"
    kept = salvage.Salvage(functools.partial(path.write_text, "saved"), "text")
    restored = pickle.loads(pickle.dumps(kept))
    kept.cancel()
    salvage.run_pending()
    assert path.read_text() == "saved"
    restored.cancel()
    unsavable = salvage.Salvage(lambda: None)
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(unsavable)
    unsavable.cancel()
