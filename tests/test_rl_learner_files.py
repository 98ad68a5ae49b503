"""What RL runs leave behind, whatever their name, their learners and the way they end.

- A renamed copy of a program, with the same seed, computes the same values: reactor seeds
  come from the instance path below the main reactor, and no port carries a path with the
  start time or the program's name.
- Two learners in one program each write their own model file (rl_algos.modelfile).
- A run stopped by Ctrl-C still writes its model.pt and learning_curve.png (rl_algos.salvage).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from conftest import ROOT, build, run_digest

from rl_algos import salvage
from rl_algos.modelfile import learner_names, model_file

LF_SRC = ROOT / "lf_src"
TWO_AGENTS = ROOT / "tests" / "rl_fixtures" / "TwoAgentsPPO.lf"
SMALL = ("-D", "max_steps=600", "-D", "target_return=0.0")


def only_run_dir(cwd: Path, program: str) -> Path:
    runs = sorted((cwd / "runs" / program).iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def without_program_name(digest: str) -> list[str]:
    """Digest lines with the main reactor's name taken off the port names."""
    out = []
    for line in digest.splitlines():
        t, m, port, h = line.split()
        out.append(f"{t} {m} {port.split('.', 1)[1]} {h}")
    return out


def test_a_renamed_copy_computes_the_same_values(tmp_path):
    copy = tmp_path / "src" / "Renamed.lf"
    copy.parent.mkdir()
    (copy.parent / "lib").symlink_to(LF_SRC / "lib")
    text = (LF_SRC / "CartPolePPO.lf").read_text(encoding="utf-8")
    copy.write_text(text.replace("main reactor CartPolePPO(", "main reactor Renamed("))
    results = []
    for name, source in (("CartPolePPO", LF_SRC / "CartPolePPO.lf"), ("Renamed", copy)):
        launcher = build(source, tmp_path / name, *SMALL)
        r, digest = run_digest(launcher, name, "-w", "1", timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        run_dir = only_run_dir(launcher.parent.parent, name)
        results.append((without_program_name(digest), (run_dir / "returns.csv").read_bytes()))
    assert results[0][0] == results[1][0], "the renamed copy computed other port values"
    assert results[0][1] == results[1][1], "the renamed copy wrote another returns.csv"


def test_two_learners_write_one_model_file_each(tmp_path):
    launcher = build(TWO_AGENTS, tmp_path)
    r, _ = run_digest(launcher, "two", "-w", "1", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = only_run_dir(launcher.parent.parent, "TwoAgentsPPO")
    assert not (run_dir / "model.pt").exists()
    a, b = (torch.load(run_dir / f"{n}.model.pt") for n in ("a_learner", "b_learner"))
    assert a["algo"] == b["algo"] == "ppo"
    assert not torch.equal(a["state_dict"]["actor.0.weight"], b["state_dict"]["actor.0.weight"])
    assert r.stdout.count("checkpoint: ") == 2


def test_model_file_names():
    assert model_file("Main.learner", ["Main.learner"]) == "model.pt"
    assert model_file("Main.a", ["Main.a", "Main.b"]) == "a.model.pt"
    assert model_file("Main.agents[1].learner", []) == "agents[1].learner.model.pt"
    assert learner_names("/nonexistent/graph.json") == []


def test_salvage_runs_once_unless_cancelled(capsys):
    done: list[str] = []
    salvage.Salvage(lambda: done.append("kept"))
    salvage.Salvage(lambda: done.append("cancelled")).cancel()
    salvage.Salvage(lambda: 1 / 0, "plot")
    salvage.Salvage(lambda: done.append("after a failure"))
    salvage.run_pending()
    salvage.run_pending()
    assert done == ["kept", "after a failure"]
    assert (
        "could not save the plot of the stopped run: ZeroDivisionError" in capsys.readouterr().err
    )


def episodes_in(cwd: Path) -> int:
    runs = list((cwd / "runs" / "CartPolePPO").glob("*/returns.csv"))
    return len(runs[0].read_text().splitlines()) - 1 if runs else 0


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_still_writes_the_model_and_the_learning_curve(tmp_path, workers):
    launcher = build(LF_SRC / "CartPolePPO.lf", tmp_path, "-D", "target_return=1000.0")
    cwd = launcher.parent.parent
    with open(tmp_path / "err.txt", "w") as err:
        proc = subprocess.Popen(
            [str(launcher), "-w", workers],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=err,
            # a background job may inherit SIGINT ignored, and Python then keeps ignoring it
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            deadline = time.monotonic() + 200
            while episodes_in(cwd) < 10 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert proc.poll() is None, "the run ended before it was interrupted"
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=120) == 130
        finally:
            proc.kill()
            proc.wait()
    run_dir = only_run_dir(cwd, "CartPolePPO")
    model = torch.load(run_dir / "model.pt")
    assert model["algo"] == "ppo" and model["env_steps"] > 0
    assert (run_dir / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert episodes_in(cwd) >= 10
    assert os.path.getsize(run_dir / "returns.csv") > 0
