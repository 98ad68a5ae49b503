"""Main-reactor parameters set on a program's command line (``--seed 3``): parsed as LF
values of their default's kind (tests/test_parameter_kinds.py has the kinds), refused
(naming ``lfc -D``) when a width or a time depends on them, and seen by every reactor on one
and on several workers."""

from __future__ import annotations

import json

import pytest
from conftest import build, run_program

from reactors.core.errors import LaunchError
from reactors.core.tag import FOREVER, MSEC, SEC
from reactors.launch.options import parse_options
from reactors.model.arguments import Code, argument, parse_value, values
from reactors.model.program import MainParameter

PROG = """target Python { fast: true }

main reactor Prog(n = 2, width = 3, period = 10 msec, label = "cart", lr = 0.001,
                  sizes = [64, 64], on = true, f = {= dict(a=1) =}) {
  inner = new[width] Inner(n = n, label = label)
  timer t(0, period)
  state ticks = 0
  reaction(t) {=
    self.ticks += 1
    if self.ticks == 3:
      request_stop()
  =}
  reaction(shutdown) {=
    print("main", self.n, self.label, self.lr, self.sizes, self.on, self.f)
  =}
}

reactor Inner(n = 0, label = "") {
  reaction(startup) {= print("inner", self.bank_index, self.n, repr(self.label)) =}
}
"""


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("params")
    src = tmp / "Prog.lf"
    src.write_text(PROG)
    return build(src, tmp / "out")


def test_values_are_read_as_lf_expressions():
    assert parse_value("3") == 3 and parse_value("-1.5e3") == -1500.0
    assert parse_value('"x y"') == "x y" and parse_value("'c'") == "c"
    assert parse_value("true") is True and parse_value("false") is False
    assert parse_value("10 msec") == MSEC(10) and parse_value("2sec") == SEC(2)
    assert parse_value("forever") == FOREVER
    assert parse_value('[1, 2 sec, [3], "a,b"]') == [1, SEC(2), [3], "a,b"]
    assert parse_value("{= dict(a=1) =}") == Code("dict(a=1)")
    assert values([argument("f", "{= dict(a=1,\nb=[2]) =}")], {}) == {"f": {"a": 1, "b": [2]}}


@pytest.mark.parametrize(
    "text, message",
    [
        ("abc", "not an integer"),
        ("3 foos", "invalid time unit 'foos'"),
        ("(1, 2)", "paren lists are not supported by the Python target: use [a, b]"),
        ("{1, 2}", "brace lists are not supported by the Python target: use [a, b]"),
        ("[1, a]", "not an integer"),
        ("", "expected a value"),
        ("1 2", "not an integer"),
    ],
)
def test_a_bad_value_says_what_is_wrong_and_what_the_parameter_takes(text, message):
    with pytest.raises(ValueError) as e:
        argument("n", text, "1")
    assert str(e.value) == f"--n {text}: {message}; n takes an integer (default 1)"


def test_a_bare_word_is_a_string_only_for_a_string_parameter():
    assert argument("env_id", "CartPole-v1", '"CartPole-v1"').text == '"CartPole-v1"'
    assert argument("env_id", "ALE/Pong-v5", '"x"').text == '"ALE/Pong-v5"'
    assert argument("env_id", '"quoted"', '"x"').text == '"quoted"'
    with pytest.raises(ValueError, match="^--n CartPole: not an integer"):
        argument("n", "CartPole", "1")


def _param(name: str, default: str = "1", fixed: str = "") -> MainParameter:
    return MainParameter(name=name, type=None, default=default, file="P.lf", line=1, fixed=fixed)


def test_options_and_parameters_mix():
    params = [_param("seed"), _param("max_steps"), _param("period", "1 sec")]
    o = parse_options(
        ["-w", "2", "--seed", "3", "--max-steps=50", "--period", "10", "msec", "-f"],
        parameters=params,
    )
    assert o.workers == 2 and o.fast
    assert [(a.name, a.text) for a in o.arguments] == [
        ("seed", "3"),
        ("max_steps", "50"),
        ("period", "10 msec"),
    ]


def test_an_unknown_option_names_the_parameters():
    with pytest.raises(LaunchError) as e:
        parse_options(["--lr", "3"], parameters=[_param("seed"), _param("learning_rate")])
    assert str(e.value) == (
        "unknown option '--lr' (the main reactor's parameters are seed, learning_rate)"
    )


def test_a_parameter_fixed_at_compile_time_says_to_use_lfc_D():
    with pytest.raises(LaunchError) as e:
        parse_options(["--members", "3"], parameters=[_param("members", "2", "the width")])
    assert "'members' is fixed at compile time (the width)" in str(e.value)
    assert "lfc -D members=3" in str(e.value)


def test_graph_json_says_which_parameters_fix_the_structure(launcher):
    graph = json.loads((launcher.parent.parent / "src-gen" / "Prog" / "graph.json").read_text())
    fixed = {p["name"]: p["fixed"] for p in graph["main_parameters"]}
    assert fixed == {
        "n": "",
        "width": "the width of bank Prog.inner",
        "period": "the period of timer Prog.t",
        "label": "",
        "lr": "",
        "sizes": "",
        "on": "",
        "f": "",
    }


def test_help_marks_compile_time_parameters(launcher):
    out = run_program(launcher, "--help").stdout
    assert "compile time only: the width of bank Prog.inner" in out
    assert "--<parameter> <value>" in out


@pytest.mark.parametrize("workers", [["-w", "1"], ["-w", "2"], ["-w", "2", "--backend", "threads"]])
def test_run_time_values_reach_every_reactor(launcher, workers):
    r = run_program(
        launcher,
        *workers,
        "--n",
        "7",
        "--label",
        "pole",
        "--lr=3e-4",
        "--sizes",
        "[8, 2]",
        "--on",
        "false",
        "--f",
        "{= dict(b=len('xy')) =}",
    )
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.splitlines())
    assert lines == [
        "inner 0 7 'pole'",
        "inner 1 7 'pole'",
        "inner 2 7 'pole'",
        "main 7 pole 0.0003 [8, 2] False {'b': 2}",
    ]


def test_defaults_stay_without_arguments(launcher):
    r = run_program(launcher)
    assert r.returncode == 0, r.stderr
    assert "main 2 cart 0.001 [64, 64] True {'a': 1}" in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--width", "5"], "Prog: error: --width 5: 'width' is fixed at compile time (the width"),
        (["--period", "5", "msec"], "fixed at compile time (the period of timer Prog.t)"),
        (
            ["--n", "x"],
            "Prog: error: --n x: not an integer; n takes an integer (default 2, Prog.lf:3)",
        ),
        (["--n"], "Prog: error: --n expects a value"),
        (["--m", "1"], "unknown option '--m' (the main reactor's parameters are n, label,"),
    ],
)
def test_bad_arguments_stop_the_program_before_it_starts(launcher, args, message):
    r = run_program(launcher, *args)
    assert r.returncode == 1 and message in r.stderr
    assert "main" not in r.stdout


def test_target_code_that_raises_is_reported(launcher):
    r = run_program(launcher, "--f", "{= 1 // 0 =}")
    assert r.returncode == 1 and "ZeroDivisionError" in r.stderr
