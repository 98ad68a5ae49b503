"""``lf-rl new``, ``runs``, ``plot`` and ``sweep`` as a user meets them: a scaffolded program of
each algorithm builds and trains; the runs of a program listed with the parameters that differ
between them; their learning curves drawn; a hyperparameter search whose trials are runs of a
built program, continued by running the same command again. The runs are those of
tests/lf_rl_fixtures/RuleCartPole.lf (CartPole balanced by a fixed rule: no torch, about a
second each)."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, build, run_in_folder

pytest.importorskip("torch")
pytest.importorskip("optuna")

from rl_algos import cli, learning_curves, run_summary, scaffold  # noqa: E402

pytestmark = pytest.mark.xdist_group("lf-rl-commands")

LF_RL = Path(sys.executable).parent / "lf-rl"
RULE = ROOT / "tests" / "lf_rl_fixtures" / "RuleCartPole.lf"


def lf_rl(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The ``lf-rl`` console script run in ``cwd``, as a user runs it."""
    return subprocess.run(
        [str(LF_RL), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def in_process(*args: str) -> tuple[int, str, str]:
    """``lf-rl ARGS`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(args))
    return status, out.getvalue(), err.getvalue()


def returns_of(run_dir: Path) -> tuple[list[int], list[float]]:
    """(steps, returns) of a run's returns.csv, read here without the library."""
    with open(run_dir / "returns.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return [int(r["step"]) for r in rows], [float(r["return"]) for r in rows]


# --------------------------------------------------------------------------- lf-rl new


@pytest.mark.parametrize(
    "algo, args",
    [
        ("ppo", ("--max_steps", "400", "--num_steps", "16")),
        ("dqn", ("--max_steps", "300", "--learning_starts", "100", "--batch_size", "32")),
        ("sac", ("--max_steps", "300", "--learning_starts", "100", "--batch_size", "32")),
    ],
)
def test_a_new_program_builds_and_trains(tmp_path, algo, args):
    name = f"New{algo.upper()}"
    status, out, err = in_process("new", name, "--algo", algo, "--dir", str(tmp_path / "lf_src"))
    assert status == 0, err
    path = tmp_path / "lf_src" / f"{name}.lf"
    text = path.read_text()
    assert f".venv/bin/lfc lf_src/{name}.lf" in text and f"bin/{name} --help" in text
    lines = text.split(f"main reactor {name}(\n", 1)[1].splitlines()
    params = lines[: next(i for i, ln in enumerate(lines) if ") {" in ln) + 1]
    assert len(params) > 10 and all(" = " in ln and "  // " in ln for ln in params), params

    launcher = build(path, tmp_path / "out")
    proc, run_dir = run_in_folder(launcher, tmp_path / "work", *args, timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]  # its budget spent, as asked
    assert "stopped at its step budget" in proc.stderr and "Traceback" not in proc.stderr
    record = json.loads((run_dir / "config.json").read_text())
    assert record["program"] == name and record["env_id"] == scaffold.DEFAULT_ENVS[algo]
    assert returns_of(run_dir)[0], "no episode ended"
    assert (run_dir / "model.pt").exists()


def test_ppo_on_continuous_actions_scales_them():
    facts = scaffold.env_facts("Pendulum-v1", "ppo")
    assert facts.continuous and facts.target == -250.0
    text = scaffold.render("SwingUp", "ppo", "Pendulum-v1", facts, "lf_src")
    assert 'import Normalize from "lib/Normalize.lf"' in text and "norm.out -> policy.steps" in text
    discrete = scaffold.render(
        "Balance", "ppo", "CartPole-v1", scaffold.env_facts("CartPole-v1", "ppo"), "lf_src"
    )
    assert "Normalize" not in discrete and "target_return = 475.0," in discrete


@pytest.mark.parametrize(
    "args, message",
    [
        (("new", "2Fast"), "'2Fast' is not a reactor name"),
        (("new", "GymEnv"), "'GymEnv' is a reserved word or a library reactor"),
        (("new", "Foo", "--algo", "a2c"), "unknown algorithm 'a2c': choose ppo, dqn or sac"),
        (("new", "Foo", "--algo", "dqn", "--env", "Pendulum-v1"), "DQN needs discrete actions"),
        (("new", "Foo", "--algo", "sac", "--env", "CartPole-v1"), "SAC needs continuous actions"),
        (("new", "Foo", "--env", "NoSuchEnv-v0"), "cannot make environment NoSuchEnv-v0"),
    ],
)
def test_new_refuses_what_it_cannot_write(tmp_path, args, message):
    status, out, err = in_process(*args, "--dir", str(tmp_path))
    assert status == 1 and err.startswith("lf-rl new: error: ") and message in err
    assert err.count("\n") == 1 and not list(tmp_path.iterdir())


def test_new_refuses_an_existing_file(tmp_path):
    (tmp_path / "Foo.lf").write_text("keep me")
    status, _, err = in_process("new", "Foo", "--dir", str(tmp_path))
    assert status == 1 and "Foo.lf exists already" in err
    assert (tmp_path / "Foo.lf").read_text() == "keep me"


# --------------------------------------------------------------------------- runs and plot


@pytest.fixture(scope="module")
def rule(tmp_path_factory) -> Path:
    """RuleCartPole, built."""
    return build(RULE, tmp_path_factory.mktemp("rule") / "out")


@pytest.fixture(scope="module")
def two_runs(rule, tmp_path_factory) -> tuple[Path, Path, Path]:
    """Two runs of RuleCartPole in one folder, differing in angle_gain and target_return: the
    first misses its target of 475 and spends its 1,500 steps, the second reaches 30.
    Returns the folder and the two run directories."""
    cwd = tmp_path_factory.mktemp("two")
    common = ("--velocity_gain", "0", "--max_steps", "1500")
    runs = []
    for extra in (("--angle_gain", "1"), ("--angle_gain", "0.5", "--target_return", "30")):
        proc = subprocess.run(
            [str(rule), *common, *extra], cwd=cwd, capture_output=True, text=True, timeout=60
        )
        runs.append(proc.stdout.split("run directory: ")[-1].strip())
    return cwd, Path(runs[0]), Path(runs[1])


def test_runs_lists_each_run_with_the_parameters_that_differ(two_runs):
    cwd, missed, solved = two_runs
    r = lf_rl(cwd, "runs", "--json")
    assert r.returncode == 0, r.stderr
    rows = {(cwd / row["run"]).resolve(): row for row in json.loads(r.stdout)}
    assert set(rows) == {missed.resolve(), solved.resolve()}
    for run_dir in (missed, solved):
        row, (steps, returns) = rows[run_dir.resolve()], returns_of(run_dir)
        assert row["program"] == "RuleCartPole" and row["env"] == "CartPole-v1"
        assert row["episodes"] == len(returns) and row["steps"] >= steps[-1]
        assert row["return"] == pytest.approx(sum(returns[-20:]) / len(returns[-20:]))
    assert rows[solved.resolve()]["status"] == "solved"
    last = returns_of(missed)[0][-1]
    assert rows[missed.resolve()]["status"] == ("budget" if last >= 1500 else "ended")
    assert rows[solved.resolve()]["params"] == {"target_return": 30.0, "angle_gain": 0.5}

    r = lf_rl(cwd, "runs", "runs", "--csv", "--sort", "return", "--reverse")
    lines = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [float(x["return"]) for x in lines] == sorted(
        (row["return"] for row in rows.values()), reverse=True
    )
    assert {x["angle_gain"] for x in lines} == {"1", "0.5"} and "seed" in lines[0]

    r = lf_rl(cwd, "runs")
    assert r.returncode == 0 and "2 runs in runs" in r.stdout and "solved" in r.stdout
    assert "target_return=30 angle_gain=0.5" in r.stdout
    assert lf_rl(cwd, "runs", "--program", "Other", "--json").stdout.strip() == "[]"


def test_a_contained_parameter_given_to_some_runs_differs_from_the_default(tmp_path):
    record = {"program": "P", "run_id": "ab" * 16, "parameters": {"seed": 1}}
    (tmp_path / "config.json").write_text(
        json.dumps({**record, "forwarded": {"learner.hidden": "[8, 8]"}})
    )
    given = run_summary.summarize(str(tmp_path))
    assert given.parameters == {"seed": 1, "learner.hidden": "[8, 8]"}

    def run(program: str, **parameters) -> run_summary.RunSummary:
        return run_summary.RunSummary(
            "", program, "E", 1, "r", None, "ended", 0, 0, None, None, parameters
        )

    default = run("P", seed=1)
    assert run_summary.config_differences([given, default]) == ["learner.hidden"]
    assert run_summary.differing_text(given, ["learner.hidden"]) == "learner.hidden=[8, 8]"
    other = run("Q", seed=1)  # another program has no such reactor: no difference
    assert run_summary.config_differences([given, other]) == []
    assert (
        run_summary.config_differences([given, run("P", seed=1, **{"learner.hidden": "[8, 8]"})])
        == []
    )


def test_status_of_a_run_with_snapshots(tmp_path):
    (tmp_path / ".run_id").write_text("1a2b3c4d" + "0" * 24 + "\n")
    (tmp_path / "learning_curve.png").write_bytes(b"")
    marks = tmp_path / "checkpoints"
    marks.mkdir()
    lock = marks / ".Prog.1a2b3c4d.lock"
    rets = run_summary.Returns(np.array([10]), np.array([5.0]))

    def status() -> str:
        return run_summary.run_status(str(tmp_path), "Prog", "1a2b3c4d" + "0" * 24, rets, {})

    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as the runtime holds it while the run goes on
        assert status() == "running"
    assert status() == "stopped"  # the lock is left, free: its process ended early
    (marks / ".Prog.1a2b3c4d.finished").write_text("{}\n")
    assert status() == "budget"


def test_runs_refuses_an_unknown_sort_key(two_runs):
    r = lf_rl(two_runs[0], "runs", "--sort", "colour")
    assert r.returncode == 1 and r.stderr.startswith("lf-rl runs: error: cannot sort by 'colour'")


def test_plot_draws_a_curve_per_run(two_runs):
    cwd, missed, solved = two_runs
    r = lf_rl(cwd, "plot", str(missed), str(solved), "-o", "both.png", "--smooth", "5")
    assert r.returncode == 0, r.stderr
    png = (cwd / "both.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000

    runs = [run_summary.summarize(str(d)) for d in (missed, solved)]
    lines = learning_curves.curves(runs, "steps", 5)
    assert [ln.label for ln in lines] == [
        "target_return=475 angle_gain=1",
        "target_return=30 angle_gain=0.5",
    ]
    for line, run_dir in zip(lines, (missed, solved)):
        steps, returns = returns_of(run_dir)
        means = [
            sum(returns[max(0, i - 4) : i + 1]) / len(returns[max(0, i - 4) : i + 1])
            for i in range(len(returns))
        ]
        assert line.x == steps and line.y == pytest.approx(means)


def test_time_axis_from_steps_per_second(tmp_path):
    metrics = (
        "step,tag,value\n40,charts/episodic_return,9\n1000,charts/SPS,500\n3000,charts/SPS,1000\n"
    )
    (tmp_path / "metrics.csv").write_text(metrics)
    seconds = learning_curves.wall_seconds(str(tmp_path), [500, 1000, 2000, 4000])
    assert seconds.tolist() == [1.0, 2.0, 2.5, 4.0]  # 2 s at 1,000 steps, 3 s at 3,000
    (tmp_path / "metrics.csv").write_text("step,tag,value\n")
    with pytest.raises(ValueError, match="no charts/SPS"):
        learning_curves.wall_seconds(str(tmp_path), [10])


def test_steps_to_target_is_where_the_window_mean_first_reaches_it():
    rets = run_summary.Returns(np.arange(1, 7) * 10, np.array([1.0, 3, 5, 1, 9, 9]))
    assert rets.steps_to_target(4.0, window=3) == 50  # means of 3: 3, 3, 5 (at step 50)
    assert rets.steps_to_target(8.0, window=3) is None
    assert rets.final_mean(window=4) == 6.0


# --------------------------------------------------------------------------- sweep


SPACE = ("--param", "angle_gain=float:0.05:1", "--param", "target_return=choice:300,475")
#: Runs that end episodes early (the rule ignores the angular velocity), and in time.
FAST = ("--", "--velocity_gain", "0", "--max_steps", "800")


def test_a_sweep_runs_its_trials_and_continues(rule, tmp_path):
    r = lf_rl(
        tmp_path,
        "sweep",
        str(rule),
        "--trials",
        "2",
        "--jobs",
        "2",
        *SPACE,
        *FAST,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "trial 0: " in r.stdout and "trial 1: " in r.stdout and "best: trial " in r.stdout
    assert (tmp_path / "runs" / "RuleCartPole-sweep.db").exists()

    again = lf_rl(tmp_path, "sweep", str(rule), "--trials", "3", *SPACE, *FAST)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "trial 2: " in again.stdout and "trial 0: " not in again.stdout
    assert "trial 3" not in again.stdout
    runs = run_summary.find_runs([str(tmp_path / "runs")])
    assert len(runs) == 3

    import optuna

    study = optuna.load_study(
        study_name="RuleCartPole",
        storage="sqlite:///" + str(tmp_path / "runs" / "RuleCartPole-sweep.db"),
    )
    for t in study.trials:
        returns = returns_of(tmp_path / t.user_attrs["run_dir"])[1]
        assert t.value == pytest.approx(sum(returns[-20:]) / len(returns[-20:]))
    best = study.best_trial
    command = again.stdout.split("command: ", 1)[1].strip().split()
    assert command == [
        str(rule),
        *FAST[1:],
        "--angle_gain",
        repr(best.params["angle_gain"]),
        "--target_return",
        best.params["target_return"],
    ]

    rerun = subprocess.run(
        command, cwd=tmp_path / "runs", capture_output=True, text=True, timeout=60
    )
    rerun_dir = Path(rerun.stdout.split("run directory: ")[-1].strip())
    original = tmp_path / best.user_attrs["run_dir"]
    assert (rerun_dir / "returns.csv").read_bytes() == (original / "returns.csv").read_bytes()


def test_a_trial_left_running_is_marked_failed_and_run_again(rule, tmp_path):
    import optuna

    from rl_algos.sweep_space import parse_param

    (tmp_path / "runs").mkdir()
    storage = f"sqlite:///{tmp_path}/runs/RuleCartPole-sweep.db"
    study = optuna.create_study(storage=storage, study_name="RuleCartPole", direction="maximize")
    study.enqueue_trial({"angle_gain": 0.25})
    killed = study.ask({"angle_gain": parse_param("angle_gain=float:0.05:1").distribution()})
    assert killed.params == {"angle_gain": 0.25}  # and left running, as by a killed sweep

    r = lf_rl(
        tmp_path,
        "sweep",
        str(rule),
        "--trials",
        "1",
        "--param",
        "angle_gain=float:0.05:1",
        *FAST,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "trial 0 was left running by a sweep that ended: marked failed" in r.stdout
    assert "trial 0 was interrupted: its values are run again as a new trial" in r.stdout
    trials = optuna.load_study(study_name="RuleCartPole", storage=storage).trials
    assert [t.state.name for t in trials] == ["FAIL", "COMPLETE"]
    assert trials[1].params == {"angle_gain": 0.25} and trials[1].user_attrs["rerun_of"] == 0


def test_steps_to_target_objective(two_runs):
    from rl_algos.sweep_trial import objective_value

    _, missed, solved = two_runs
    steps, returns = returns_of(solved)
    first = next(i for i in range(19, len(returns)) if sum(returns[i - 19 : i + 1]) / 20 >= 30)
    assert objective_value(str(solved), "steps_to_target") == steps[first]
    assert objective_value(str(missed), "steps_to_target") == math.inf


@pytest.mark.parametrize(
    "param, message",
    [
        ("angle_gain=float:1", "float:LOW:HIGH takes two numbers"),
        (
            "angle_gain=normal:0:1",
            "SPEC one of int:LOW:HIGH, float:LOW:HIGH, log:LOW:HIGH or choice:A,B,C",
        ),
        ("angle_gain=log:0:1", "log:LOW:HIGH needs 0 < LOW"),
        ("gain=float:0:1", "RuleCartPole has no parameter 'gain'; it has: env_id, seed,"),
        ("members=int:1:4", "members of RuleCartPole is set when compiled only"),
        ("max_steps=float:1:2", "max_steps of RuleCartPole takes an integer (default 2000)"),
    ],
)
def test_sweep_refuses_a_bad_search_space(rule, param, message):
    status, out, err = in_process("sweep", str(rule), "--trials", "2", "--param", param)
    assert status == 1 and err.startswith("lf-rl sweep: error: ") and message in err, err
    assert err.count("\n") == 1 and not out


def test_sweep_refuses_a_program_not_built():
    status, _, err = in_process("sweep", "NoSuch", "--trials", "1", "--param", "a=int:1:2")
    assert status == 1 and "no program bin/NoSuch: build it first (make build" in err


def test_a_sweep_stopped_marks_its_trial_failed_and_runs_it_again(rule, tmp_path):
    space = ("--param", "angle_gain=float:0.05:1")
    slow = ("--", "--velocity_gain", "0", "--max_steps", "10000000")
    sweep = subprocess.Popen(
        [str(LF_RL), "sweep", str(rule), "--trials", "1", *space, *slow],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("runs/RuleCartPole/*/returns.csv")):
        assert time.monotonic() < deadline and sweep.poll() is None, sweep.communicate()
        time.sleep(0.1)
    sweep.send_signal(signal.SIGTERM)
    out, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, out + err
    assert "interrupted: trials 0 marked failed; the same command runs them again" in out

    r = lf_rl(tmp_path, "sweep", str(rule), "--trials", "1", *space, *FAST)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "trial 0 was interrupted: its values are run again as a new trial" in r.stdout
    assert "trial 1: angle_gain=" in r.stdout and "complete (rerun of 0)" in r.stdout
