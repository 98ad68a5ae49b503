"""``lf-rl eval`` as a user meets it: a model evaluated on an environment of other spaces, a run
directory that is not there or has no model yet, evaluations kept in ``eval.json``; and an
environment of the user's own module (``--env_id corridor:Corridor-v0``, the module in the
current directory) for a program on two worker processes, its resume and its evaluation."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, build

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from rl_algos import cli  # noqa: E402

pytestmark = pytest.mark.xdist_group("rl-eval")

CORRIDOR = ROOT / "tests" / "rl_fixtures" / "corridor.py"
ENV_ID = "corridor:Corridor-v0"
LF_RL = Path(sys.executable).parent / "lf-rl"


def lf_rl(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The ``lf-rl`` console script run in ``cwd``, as a user runs it (no PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(LF_RL), *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env
    )


@pytest.fixture(scope="module")
def corridor_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, Path]:
    """CartPolePPO trained for 512 steps of the corridor on two worker processes, from a folder
    that holds corridor.py, with a snapshot after every update; returns the folder, the
    process and the run directory."""
    tmp = tmp_path_factory.mktemp("corridor")
    launcher = build(ROOT / "lf_src" / "CartPolePPO.lf", tmp / "out")
    cwd = tmp / "work"
    cwd.mkdir()
    shutil.copy(CORRIDOR, cwd / "corridor.py")
    args = ("-w", "2", "--env_id", ENV_ID, "--max_steps", "512", "--target_return", "2")
    proc = subprocess.run(
        [str(launcher), *args, "--checkpoint_every", "1"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=150,
    )
    runs = sorted((cwd / "runs" / "CartPolePPO").glob("*")) if (cwd / "runs").exists() else []
    assert len(runs) == 1, proc.stderr[-3000:]
    return cwd, proc, runs[0]


def test_a_program_trains_on_an_environment_of_the_users_module(corridor_run):
    cwd, proc, run_dir = corridor_run
    assert proc.returncode == 1, proc.stderr[-3000:]  # its budget spent, as asked
    assert "stopped at its step budget" in proc.stderr and "Traceback" not in proc.stderr
    assert json.loads((run_dir / "config.json").read_text())["env_id"] == ENV_ID
    returns = (run_dir / "returns.csv").read_text().splitlines()
    assert len(returns) > 20 and returns[0] == "episode,step,return,length,env"

    # the newest snapshot, once more with a larger budget: the environments are unpickled
    # before any is made, in a process that has not imported the module yet
    snapshot = sorted((run_dir / "checkpoints").glob("*.lfsnap"))[-1]
    resumed = subprocess.run(
        [str(proc.args[0]), "--resume", str(snapshot), "--max_steps", "768"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert resumed.returncode == 1 and "stopped at its step budget" in resumed.stderr, (
        resumed.stderr[-3000:]
    )
    assert "768 environment steps" in resumed.stdout


def test_eval_imports_the_environments_module(corridor_run, tmp_path):
    cwd, _, run_dir = corridor_run
    r = lf_rl(cwd, "eval", str(run_dir), "--episodes", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{ENV_ID}: mean return ") and "over 2 episodes" in r.stdout

    elsewhere = lf_rl(tmp_path, "eval", str(run_dir), "--episodes", "2")
    assert elsewhere.returncode == 1 and len(elsewhere.stderr.splitlines()) == 1
    assert elsewhere.stderr.startswith(
        "lf-rl eval: error: cannot import module 'corridor' of environment corridor:Corridor-v0"
    )
    assert str(tmp_path) in elsewhere.stderr and "PYTHONPATH" in elsewhere.stderr


@pytest.fixture
def in_run_folder(corridor_run, monkeypatch):
    """``lf_rl_main(*args)``: ``lf-rl`` in this process, in the folder of the corridor run;
    returns (status, stdout, stderr). The import path is restored after (the corridor module,
    once imported, stays registered with gymnasium)."""
    cwd, _, run_dir = corridor_run
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", list(sys.path))
    out, err = io.StringIO(), io.StringIO()

    def lf_rl_main(*args: str) -> tuple[int, str, str]:
        out.seek(0), out.truncate(), err.seek(0), err.truncate()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main(list(args))
        return status, out.getvalue(), err.getvalue()

    return lf_rl_main, run_dir


def test_eval_on_an_environment_of_other_spaces_names_both(in_run_folder):
    lf_rl_main, run_dir = in_run_folder
    assert lf_rl_main("eval", str(run_dir), "--env", "CartPole-v1") == (
        1,
        "",
        f"lf-rl eval: error: model.pt was trained on {ENV_ID} (obs (2,), 2 actions); "
        "CartPole-v1 has obs (4,), 2 actions\n",
    )
    status, _, err = lf_rl_main("eval", str(run_dir), "--env", "Pendulum-v1")
    assert status == 1 and err.endswith("; Pendulum-v1 has obs (3,), continuous actions (1,)\n")


def test_eval_json_keeps_every_evaluation(in_run_folder):
    lf_rl_main, run_dir = in_run_folder
    (run_dir / "eval.json").unlink(missing_ok=True)
    for args in (["--episodes", "2"], ["--episodes", "3", "--seed", "7"], ["--episodes", "2"]):
        status, out, err = lf_rl_main("eval", str(run_dir), *args)
        assert status == 0, err
    kept = json.loads((run_dir / "eval.json").read_text())
    assert [(e["episodes"], e["seed"]) for e in kept] == [(2, 1_000_000), (3, 7), (2, 1_000_000)]
    assert kept[0]["returns"] == kept[2]["returns"] and kept[0]["env_id"] == ENV_ID
    assert all(e["model_sha256"] == kept[0]["model_sha256"] for e in kept)
    assert out.splitlines()[-1] == f"saved: {run_dir / 'eval.json'} (evaluation 3 in it)"


def test_eval_says_what_is_missing(in_run_folder, tmp_path):
    lf_rl_main, run_dir = in_run_folder

    def error(path: Path) -> str:
        status, _, err = lf_rl_main("eval", str(path))
        assert status == 1 and len(err.splitlines()) == 1, err
        return err.removeprefix("lf-rl eval: error: ").strip()

    nope = tmp_path / "runs" / "Nope"
    assert error(nope) == f"{nope} does not exist"
    started = tmp_path / "runs" / "Prog" / "20261128-101500-123-1a2b3c4d"
    started.mkdir(parents=True)
    (started / "config.json").write_text("{}")
    assert error(started) == (
        f"{started} has no model.pt yet: a run saves it when it ends or is stopped "
        "(Ctrl-C, SIGTERM)"
    )
    assert error(started.parent) == f"no run in {started.parent} has a model.pt yet (1 run)"
    empty = tmp_path / "runs" / "Empty"
    empty.mkdir()
    assert error(empty) == (
        f"{empty} is neither a run directory nor a folder of runs: no model.pt, no run in it"
    )
    assert lf_rl_main("eval", str(run_dir.parent), "--episodes", "1")[0] == 0  # its newest run
