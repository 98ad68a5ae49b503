"""Parameters of the reactors inside the main one, set on a program's command line
(``--learner.device cpu``, reactors.model.forwarding) or by ``lfc -D PATH.NAME=VALUE``:
set on every member of a bank, checked as main parameters are (kind, unknown names with a
did-you-mean, compile-time ones refused), the command line first, then the ``.lf``
instantiation, then the reactor's default; the same on one and two workers, and kept by a
resumed run. The program is tests/forwarding_fixtures/Nest.lf; the RL learners' own
parameters (``hidden``, ``device``) run on CartPolePPO."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import torch
from conftest import ROOT, build, run_in_folder, run_program

from reactors.core.errors import LaunchError
from reactors.launch.options import parse_options
from reactors.model.forwarding import instance_path
from reactors.model.program import ContainedParameter
from rl_algos.config import ConfigError, chosen

NEST = ROOT / "tests" / "forwarding_fixtures" / "Nest.lf"
#: What Nest prints without arguments (the leaves' lines, then the total and the stop).
DEFAULT = [
    "Nest.mid.leaves[0] 3 'banked' [1, 2] 1.0",
    "Nest.mid.leaves[1] 3 'banked' [1, 2] 1.0",
    "Nest.solo 0 'solo' [1, 2] 1.0",
    "total 6.0",
    "stop after 3 ticks",
]


@pytest.fixture(scope="module")
def nest(tmp_path_factory) -> Path:
    return build(NEST, tmp_path_factory.mktemp("nest") / "out")


def lines(r) -> list[str]:
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_without_arguments_the_instantiations_and_defaults_hold(nest):
    assert lines(run_program(nest)) == DEFAULT


def test_a_bank_member_and_a_single_instance_take_their_values(nest):
    r = run_program(nest, "--mid.leaves.scale", "2.5", "--solo.n=5", "--clock.ticks", "2")
    assert lines(r) == [
        "Nest.mid.leaves[0] 3 'banked' [1, 2] 2.5",
        "Nest.mid.leaves[1] 3 'banked' [1, 2] 2.5",
        "Nest.solo 5 'solo' [1, 2] 1.0",
        "total 20.0",
        "stop after 2 ticks",
    ]


def test_the_command_line_comes_before_the_instantiation_then_the_default(nest):
    # mid.k replaces main's k in mid's instantiation, and the leaves' n = k follows it;
    # mid.leaves.n replaces that argument itself; solo.label replaces "solo"
    r = run_program(nest, "--mid.k", "4", "--solo.label", "x", "--solo.sizes", "[7]")
    assert lines(r)[:3] == [
        "Nest.mid.leaves[0] 4 'banked' [1, 2] 1.0",
        "Nest.mid.leaves[1] 4 'banked' [1, 2] 1.0",
        "Nest.solo 0 'x' [7] 1.0",
    ]
    r = run_program(nest, "--mid.k", "4", "--mid.leaves.n", "9", "--k", "7")
    assert lines(r)[:2] == [
        "Nest.mid.leaves[0] 9 'banked' [1, 2] 1.0",
        "Nest.mid.leaves[1] 9 'banked' [1, 2] 1.0",
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--mid.leaf.n", "1"],
            "unknown option '--mid.leaf.n': no reactor inside is called 'mid.leaf'; did you "
            "mean '--mid.leaves.n'? (those with parameters: mid, mid.leaves, solo, clock)",
        ),
        (
            ["--solo.nn", "1"],
            "unknown option '--solo.nn': Leaf 'solo' has no parameter 'nn'; did you mean "
            "'--solo.n'? (its parameters are n, label, sizes, scale)",
        ),
        (
            ["--mid.width", "3"],
            "--mid.width 3: 'mid.width' is fixed at compile time (the width of bank "
            "Nest.mid.leaves); rebuild the program with lfc -D mid.width=3",
        ),
        (
            ["--clock.period", "5", "msec"],
            "fixed at compile time (the period of timer Nest.clock.t)",
        ),
        (
            ["--mid.leaves.sizes", "3"],
            "--mid.leaves.sizes 3: not a list; mid.leaves.sizes takes a list of integers "
            "(default [1, 2], Nest.lf:12)",
        ),
        (["--solo.n", "1.5"], "--solo.n 1.5: not an integer; solo.n takes an integer"),
        (["--solo.n"], "--solo.n expects a value"),
        (
            ["--label", "x"],
            "unknown option '--label'; did you mean '--mid.leaves.label' or '--solo.label'? "
            "(the main reactor's parameters are k, seed)",
        ),
    ],
)
def test_bad_options_stop_the_program_with_one_line(nest, args, message):
    r = run_program(nest, *args)
    assert r.returncode == 1 and r.stdout == ""
    first, pointer = r.stderr.splitlines()
    assert first.startswith("Nest: error: ") and message in first
    assert pointer == "run ./bin/Nest --help for the options"


def _p(path: str, name: str, declared: str = "1", fixed: str = "") -> ContainedParameter:
    return ContainedParameter(
        path=path,
        name=name,
        class_name="R",
        type=None,
        default=declared,
        declared=declared,
        file="R.lf",
        line=2,
        fixed=fixed,
    )


def test_options_name_a_contained_parameter_by_its_path():
    contained = [_p("a", "n"), _p("a.b", "max_steps"), _p("a.b", "period", "1 sec")]
    o = parse_options(
        ["--a.n", "3", "--a.b.max-steps=50", "--a.b.period", "10", "msec", "-w", "2"],
        contained=contained,
    )
    assert o.workers == 2
    assert [(a.name, a.text) for a in o.arguments] == [
        ("a.n", "3"),
        ("a.b.max_steps", "50"),
        ("a.b.period", "10 msec"),
    ]
    with pytest.raises(LaunchError, match="no reactor inside is called 'x'"):
        parse_options(["--x.n", "1"], contained=contained)


def test_instance_paths_drop_the_main_reactor_and_bank_indexes():
    assert instance_path("Main") == ""
    assert instance_path("Main.learner") == "learner"
    assert instance_path("Main.a[3].b[0]") == "a.b"


def _digest(launcher: Path, name: str, *args: str) -> str:
    path = launcher.parent.parent / name
    r = run_program(launcher, "--digest", str(path), *args)
    assert r.returncode == 0, r.stderr
    return path.read_text()


def test_two_workers_see_the_values_one_worker_sees(nest):
    given = ("--mid.leaves.scale", "3", "--solo.n", "2", "--clock.ticks", "5")
    one = _digest(nest, "w1.digest", *given)
    assert one != _digest(nest, "plain.digest")  # the values change what the ports carry
    assert _digest(nest, "w2.digest", "-w", "2", *given) == one
    assert _digest(nest, "th.digest", "-w", "2", "--backend", "threads", *given) == one


def test_a_resumed_run_keeps_the_values_it_was_started_with(nest):
    folder = nest.parent.parent / "snapshots"
    given = ("--clock.ticks", "40", "--solo.n", "2")
    full = _digest(
        nest,
        "full.digest",
        *given,
        "--checkpoint-every-tags",
        "10",
        "--checkpoint-dir",
        str(folder),
    )
    snapshot = sorted(folder.glob("*.lfsnap"))[1]
    path = nest.parent.parent / "resumed.digest"
    r = run_program(nest, "--resume", str(snapshot), "--digest", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["stop after 40 ticks"]
    resumed = path.read_text().splitlines()
    assert resumed and resumed == full.splitlines()[-len(resumed) :]


def test_graph_json_lists_the_contained_parameters(nest):
    graph = json.loads((nest.parent.parent / "src-gen" / "Nest" / "graph.json").read_text())
    by_option = {f"{p['path']}.{p['name']}": p for p in graph["contained_parameters"]}
    assert list(by_option)[:4] == ["mid.width", "mid.k", "mid.leaves.n", "mid.leaves.label"]
    assert by_option["mid.leaves.n"] | {"file": ""} == {
        "path": "mid.leaves",
        "name": "n",
        "class": "Leaf",
        "type": None,
        "default": "k",
        "declared": "0",
        "file": "",
        "line": 10,
        "members": 2,
        "fixed": "",
        "doc": "a count, printed with the leaf's name",
    }
    assert by_option["mid.width"]["fixed"] == "the width of bank Nest.mid.leaves"
    assert by_option["clock.period"]["fixed"] == "the period of timer Nest.clock.t"


def test_lfc_D_sets_a_contained_parameter_when_compiled(tmp_path):
    launcher = build(
        NEST,
        tmp_path / "out",
        "-D",
        "mid.width=3",
        "-D",
        "solo.label=dee",
        "-D",
        "clock.period=5 msec",
    )
    out = lines(run_program(launcher))
    assert [line.split()[0] for line in out[:4]] == [
        "Nest.mid.leaves[0]",
        "Nest.mid.leaves[1]",
        "Nest.mid.leaves[2]",
        "Nest.solo",
    ]
    assert out[3] == "Nest.solo 0 'dee' [1, 2] 1.0"
    graph = json.loads((tmp_path / "out" / "src-gen" / "Nest" / "graph.json").read_text())
    periods = [t["period"] for r in graph["reactors"] for t in r["timers"]]
    assert periods == [5_000_000]


@pytest.mark.parametrize(
    "define, message",
    [
        ("mdi.k=2", "-D mdi.k=2: reactor 'Nest' has no instance 'mdi'; did you mean 'mid'?"),
        (
            "mid.widht=3",
            "-D mid.widht=3: 'mid' (Mid) has no parameter 'widht'; did you mean 'width'?",
        ),
        ("mid.k=x", "-D mid.k=x: not an integer; mid.k takes an integer (default 1, Nest.lf:23)"),
    ],
)
def test_lfc_D_refuses_an_unknown_or_wrong_contained_parameter(tmp_path, define, message):
    from codegen import cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = cli.main(["-o", str(tmp_path / "out"), "-D", define, str(NEST)])
    assert status == 1 and f"lfc: error: {message}" in err.getvalue()
    assert not (tmp_path / "out" / "bin" / "Nest").exists()


# --------------------------------------------------------------------------- the RL learners


def test_a_learners_own_choice_wins_over_its_hyperparameters():
    hparams = {"hidden": (64, 64), "device": "auto", "gamma": 0.9}
    assert chosen(hparams, hidden=[], device="") == hparams
    assert chosen(hparams, hidden=[128, 128], device="cpu") == {
        "hidden": [128, 128],
        "device": "cpu",
        "gamma": 0.9,
    }
    with pytest.raises(ConfigError, match=r"^hidden \[0\]: expected a list of positive"):
        chosen({}, hidden=[0])
    with pytest.raises(ConfigError, match="^device 'gpu': expected 'auto', 'cpu', 'cuda'"):
        chosen({}, device="gpu")
    kwargs = {"network_kwargs": {"hidden": 8}}
    assert chosen(kwargs, network_kwargs={}) == kwargs
    assert chosen(kwargs, network_kwargs={"hidden": 32}) == {"network_kwargs": {"hidden": 32}}
    with pytest.raises(ConfigError, match="^network_kwargs 5: expected a dict"):
        chosen({}, network_kwargs=5)


def test_cartpole_ppo_takes_the_learners_network_size_and_device(tmp_path):
    launcher = build(ROOT / "lf_src" / "CartPolePPO.lf", tmp_path / "out")
    args = ("-o", "40", "msec", "--learner.hidden", "[8, 8]", "--learner.device", "cpu")
    proc, run_dir = run_in_folder(launcher, tmp_path / "run", *args, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]  # stopped by -o before the target
    model = torch.load(run_dir / "model.pt", weights_only=False)
    assert model["spec"]["hidden"] == (8, 8) and model["config"]["device"] == "cpu"
    record = json.loads((run_dir / "config.json").read_text())
    # as LF expressions: a string is quoted
    assert record["forwarded"] == {"learner.hidden": "[8, 8]", "learner.device": '"cpu"'}
    r = run_program(launcher, "--learner.hidden", "8")
    assert r.returncode == 1
    assert "--learner.hidden 8: not a list; learner.hidden takes a list" in r.stderr
