"""The RL programs in lf_src/ (CartPolePPO, the main job, and CartPoleDQN), built with the
real lfc and run on short budgets.

The budget and the target are parameters of each main reactor (`max_steps`,
`target_return`); a test builds the program with other defaults (`lfc -D name=value`) and runs
it in its own directory, where it writes runs/<program>/<start time>/. Each program runs
twice, on 1 and on 2 workers: the same seed must give a byte-identical returns.csv.
"""

from __future__ import annotations

import csv
from pathlib import Path

from conftest import ROOT, build, run_in_folder

LF_SRC = ROOT / "lf_src"


def program_copy(tmp_path: Path, name: str, **defaults) -> Path:
    """Build lf_src/<name>.lf with its main reactor's parameter defaults replaced."""
    defines = [arg for k, v in defaults.items() for arg in ("-D", f"{k}={v}")]
    return build(LF_SRC / f"{name}.lf", tmp_path / "out", *defines)


def run_in(launcher: Path, cwd: Path, name: str, *args: str):
    """Run the program ``name`` in ``cwd`` with program options ``args``; (process, run dir)."""
    assert launcher.name == name
    return run_in_folder(launcher, cwd, *args, timeout=150)


def returns_of(run_dir: Path) -> list[float]:
    with open(run_dir / "returns.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0])[:3] == ["episode", "step", "return"]
    return [float(r["return"]) for r in rows]


def check_twice(tmp_path: Path, name: str, target: float, **defaults):
    launcher = program_copy(tmp_path, name, target_return=target, **defaults)
    # The same seed on 1 and on 2 workers (processes) must give the same returns.csv.
    (p1, d1), (p2, d2) = (
        run_in(launcher, tmp_path / f"run{w}", name, "-w", str(w)) for w in (1, 2)
    )
    for p in (p1, p2):
        assert p.returncode == 0, f"{name} exited {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    assert (d1 / "returns.csv").read_bytes() == (d2 / "returns.csv").read_bytes()
    for f in ("learning_curve.png", "model.pt", "graph.json"):
        assert (d1 / f).stat().st_size > 0, f
    rets = returns_of(d1)
    assert sum(rets[-20:]) / 20 >= target  # a random policy averages about 22
    return rets


def test_ppo_main_job_learns_and_is_deterministic(tmp_path):
    check_twice(tmp_path, "CartPolePPO", 150.0, max_steps=20000)


def test_dqn_learns_and_is_deterministic(tmp_path):
    check_twice(tmp_path, "CartPoleDQN", 100.0, max_steps=15000)
    losses = (tmp_path / "run1").glob("runs/CartPoleDQN/*/losses.csv")
    rows = [line.split(",") for line in next(losses).read_text().splitlines()[1:]]
    assert {tag for _, tag, _ in rows} == {"losses/td_loss", "losses/q_values"}
    steps = [int(step) for step, tag, _ in rows if tag == "losses/td_loss"]
    assert steps == sorted(steps) and len(steps) >= 10  # every 100 gradient steps


def test_budget_exhausted_is_a_failure(tmp_path):
    launcher = program_copy(tmp_path, "CartPolePPO", max_steps=800)
    proc, run_dir = run_in(launcher, tmp_path / "run", "CartPolePPO")
    assert proc.returncode == 1
    assert "did NOT reach" in proc.stdout
    assert returns_of(run_dir) and (run_dir / "model.pt").exists()
