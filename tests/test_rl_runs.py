"""What an RL run leaves for its user: run-time hyperparameters, config.json, TensorBoard
event files and metrics CSVs under CleanRL's tag names, a checkpoint that names its
environment and network, ``lf-rl eval``, and a plain message when the budget runs out."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, build

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from rl_algos.config import hyperparameters, make_config  # noqa: E402
from rl_algos.dqn import DQNConfig  # noqa: E402
from rl_algos.ppo import PPOConfig  # noqa: E402

PPO_TAGS = {
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/clipfrac",
    "charts/learning_rate",
}
LOGGER_TAGS = {"charts/episodic_return", "charts/episodic_length", "charts/SPS"}

# one xdist worker runs the whole module (make test: ``--dist loadgroup``), so that its
# module-scoped runs are made once
pytestmark = pytest.mark.xdist_group("rl-runs")


@pytest.fixture(scope="module")
def ppo(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("ppo")
    return build(ROOT / "lf_src" / "CartPolePPO.lf", tmp / "out")


def run(launcher: Path, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    """Run the program in ``cwd`` (made here); returns the process and its run directory."""
    cwd.mkdir()
    proc = subprocess.run(
        [str(launcher), *args], cwd=cwd, capture_output=True, text=True, timeout=150
    )
    runs = sorted((cwd / "runs" / "CartPolePPO").iterdir())
    assert len(runs) == 1, proc.stderr[-3000:]
    return proc, runs[0]


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def solved_run(ppo, tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """A short run given its budget, target and a hyperparameter on the command line."""
    cwd = tmp_path_factory.mktemp("solved") / "run"
    args = ["-w", "2", "--seed", "4", "--max_steps", "3000", "--target_return", "30"]
    return run(ppo, cwd, *args, "--learning_rate", "5e-4")


def test_run_time_parameters_are_used_and_recorded(solved_run):
    proc, run_dir = solved_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = json.loads((run_dir / "config.json").read_text())
    assert config["program"] == "CartPolePPO" and config["env_id"] == "CartPole-v1"
    assert config["seed"] == 4 and config["workers"] == 2
    params = config["parameters"]
    assert params["max_steps"] == 3000 and params["learning_rate"] == 5e-4
    assert params["members"] == 2 and params["anneal_lr"] is True
    assert config["packages"]["torch"] == torch.__version__
    assert "git_revision" in config and config["command_line"][:2] == ["-w", "2"]
    ckpt = torch.load(run_dir / "model.pt", weights_only=True)
    assert ckpt["config"]["learning_rate"] == 5e-4 and ckpt["config"]["total_steps"] == 3000


def test_checkpoint_names_its_environment_and_network(solved_run):
    _, run_dir = solved_run
    ckpt = torch.load(run_dir / "model.pt", weights_only=True)
    assert ckpt["env_id"] == "CartPole-v1" and ckpt["kind"] == "actor_critic"
    assert ckpt["spec"]["obs_shape"] == (4,) and ckpt["spec"]["n_actions"] == 2


def test_metrics_go_to_csv_files_with_cleanrl_tags(solved_run):
    _, run_dir = solved_run
    logged = rows(run_dir / "metrics.csv")
    assert {r["tag"] for r in logged} >= {"charts/episodic_return", "charts/episodic_length"}
    returns = [float(r["return"]) for r in rows(run_dir / "returns.csv")]
    assert [float(r["value"]) for r in logged if r["tag"] == "charts/episodic_return"] == returns
    losses = rows(run_dir / "losses.csv")
    assert {r["tag"] for r in losses} == PPO_TAGS
    steps = sorted({int(r["step"]) for r in losses})
    assert steps[0] == 32 * 8 and all(s % 256 == 0 for s in steps)  # one row set per update
    lr = [float(r["value"]) for r in losses if r["tag"] == "charts/learning_rate"]
    assert lr[0] < 5e-4 and lr == sorted(lr, reverse=True)  # annealed from 5e-4


def test_tensorboard_reads_the_same_scalars(solved_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, run_dir = solved_run
    tags: set[str] = set()
    for f in run_dir.glob("events.out.tfevents.*"):
        acc = EventAccumulator(str(f))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
        if "losses/entropy" in acc.Tags()["scalars"]:
            csv_rows = [r for r in rows(run_dir / "losses.csv") if r["tag"] == "losses/entropy"]
            events = acc.Scalars("losses/entropy")
            assert [e.step for e in events] == [int(r["step"]) for r in csv_rows]
            assert [e.value for e in events] == pytest.approx([float(r["value"]) for r in csv_rows])
    assert tags >= PPO_TAGS | {"charts/episodic_return", "charts/episodic_length"}


def test_lf_rl_eval_reports_mean_and_std_and_writes_a_gif(solved_run):
    _, run_dir = solved_run
    cmd = [sys.executable, "-m", "rl_algos.cli", "eval", str(run_dir), "--episodes", "3"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([*cmd, "--video"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("CartPole-v1: mean return ") and "over 3 episodes" in r.stdout
    result = json.loads((run_dir / "eval.json").read_text())[-1]  # the newest evaluation
    assert result["episodes"] == 3 and len(result["returns"]) == 3
    assert result["mean_return"] == pytest.approx(sum(result["returns"]) / 3)
    gif = run_dir / "episode.gif"
    assert gif.read_bytes()[:6] == b"GIF89a"
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert again.stdout.splitlines()[0] == r.stdout.splitlines()[0]  # its own fixed seeds
    missing = subprocess.run(
        [*cmd[:4], str(run_dir / "nope")], capture_output=True, text=True, env=env
    )
    assert missing.returncode == 1 and missing.stderr == (
        f"lf-rl eval: error: {run_dir / 'nope'} does not exist\n"
    )


def test_a_missed_target_is_one_plain_line(ppo, tmp_path):
    proc, run_dir = run(ppo, tmp_path / "run", "--max_steps", "800")
    assert proc.returncode == 1 and "did NOT reach" in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("CartPolePPO: stopped at its step budget (max_steps)")
    assert "ERROR" not in proc.stderr and "Traceback" not in proc.stderr
    assert (run_dir / "model.pt").exists() and (run_dir / "config.json").exists()


def test_timeout_stops_an_rl_program(ppo, tmp_path):
    proc, run_dir = run(ppo, tmp_path / "run", "-o", "50", "msec")
    assert proc.returncode == 1
    assert "stopped at its time limit (-o)" in proc.stderr
    # one environment step is one millisecond: the resets at 0 ms, then 50 steps of 8 envs
    assert "400 environment steps" in proc.stdout


def test_unknown_hyperparameters_are_named_with_the_valid_ones():
    with pytest.raises(ValueError) as e:
        make_config(PPOConfig, {"lr": 1e-3})
    assert str(e.value).startswith("unknown hyperparameter 'lr' for PPOConfig; valid: ")
    assert "learning_rate" in str(e.value)
    with pytest.raises(ValueError, match="learning_rate of PPOConfig must be a float"):
        make_config(PPOConfig, {"learning_rate": "fast"})
    with pytest.raises(ValueError, match="num_steps of PPOConfig must be a int, not True"):
        make_config(PPOConfig, {"num_steps": True})
    cfg = make_config(DQNConfig, {"hidden": [32, 32], "learning_rate": 1}, total_steps=5)
    assert cfg.hidden == (32, 32) and cfg.total_steps == 5


def test_hyperparameters_are_picked_from_the_main_parameters():
    picked = hyperparameters(PPOConfig, {"seed": 1, "gamma": 0.9, "hidden": [8]})
    assert picked == {"gamma": 0.9, "hidden": (8,)}


def test_video_as_mp4_or_gif(tmp_path, monkeypatch):
    from rl_algos.evaluate import write_video

    frames = [np.full((30, 50, 3), k * 40, dtype=np.uint8) for k in range(6)]
    assert write_video(frames, str(tmp_path / "a.gif")) == str(tmp_path / "a.gif")
    assert (tmp_path / "a.gif").read_bytes()[:6] == b"GIF89a"
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # the plugin not installed
    with pytest.raises(ImportError, match=r"pip install imageio-ffmpeg"):
        write_video(frames, str(tmp_path / "b.mp4"))
    monkeypatch.undo()
    write_video(frames, str(tmp_path / "c.mp4"))
    assert (tmp_path / "c.mp4").read_bytes()[4:8] == b"ftyp"  # an ISO media (MP4) file
