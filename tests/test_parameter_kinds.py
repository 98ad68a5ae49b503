"""A main-reactor parameter takes values of its default's kind (an integer, a number, true or
false, a string, a time, a list), on the program's command line (``--seed 3``) and through
``lfc -D``; a wrong value, an unknown name and a bad option are one-line errors that name
the value given, the kind expected and where the default is."""

from __future__ import annotations

import pytest
from conftest import build, lfc, run_program

from reactors.core.errors import LaunchError
from reactors.launch.options import parse_options
from reactors.model.arguments import argument
from reactors.model.program import MainParameter

KINDS = """target Python { fast: true }
main reactor Kinds(seed = 1, lr = 1e-3, on = true, env_id = "CartPole-v1", delay = 5 msec,
                   sizes = [64, 64], rates = [0.5, 1], f = {= dict(a=1) =}) {
  reaction(startup) {=
    print(self.seed, self.lr, self.on, repr(self.env_id), self.delay, self.sizes, self.rates,
          self.f)
  =}
}
"""

#: The names of KINDS's parameters, as the unknown-name errors list them.
NAMES = "seed, lr, on, env_id, delay, sizes, rates, f"


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kinds")
    src = tmp / "Kinds.lf"
    src.write_text(KINDS)
    return build(src, tmp / "out")


@pytest.mark.parametrize(
    "name, text, default, taken",
    [
        ("seed", "3", "1", "3"),
        ("seed", "-2", "1", "-2"),
        ("lr", "1", "1e-3", "1"),  # an integer is a number
        ("lr", "-2.5e-4", "1e-3", "-2.5e-4"),
        ("on", "False", "true", "False"),
        ("env_id", "Acrobot-v1", '"CartPole-v1"', '"Acrobot-v1"'),
        ("env_id", "2024-01", '"x"', '"2024-01"'),  # any unquoted text, not 2023
        ("env_id", "my run", '"x"', '"my run"'),
        ("env_id", "true", '"x"', '"true"'),
        ("env_id", "'quoted'", '"x"', '"quoted"'),
        ("delay", "0", "5 msec", "0"),
        ("delay", "2 sec", "5 msec", "2 sec"),
        ("delay", "forever", "5 msec", "forever"),
        ("sizes", "[8, 16]", "[64, 64]", "[8, 16]"),
        ("sizes", "[]", "[64, 64]", "[]"),
        ("rates", "[1, 2.5]", "[0.5, 1]", "[1, 2.5]"),
        ("mixed", '[2 msec, "a"]', "[1, 2 msec]", '[2 msec, "a"]'),  # mixed items: any
        ("f", "3", "{= dict(a=1) =}", "3"),  # target code default: any value
        ("seed", "{= 2 + 1 =}", "1", "{= 2 + 1 =}"),  # target code: Python's to check
    ],
)
def test_a_value_of_the_defaults_kind_is_taken(name, text, default, taken):
    assert argument(name, text, default, where="P.lf:2").text == taken


@pytest.mark.parametrize(
    "name, text, default, problem",
    [
        ("seed", "1.5", "1", "not an integer; seed takes an integer"),
        ("seed", "2.0", "1", "not an integer; seed takes an integer"),
        ("seed", "true", "1", "not an integer; seed takes an integer"),
        ("seed", "10 msec", "1", "not an integer; seed takes an integer"),
        ("seed", "1 2", "1", "not an integer; seed takes an integer"),
        ("lr", "fast", "1e-3", "not a number; lr takes a number"),
        ("lr", '"fast"', "1e-3", "not a number; lr takes a number"),
        ("lr", "[1,2]", "1e-3", "not a number; lr takes a number"),
        ("on", "1", "true", "not true or false; on takes true or false"),
        ("delay", "5", "5 msec", "a time needs a unit (e.g. 5 msec); delay takes a time"),
        ("delay", "3 foos", "5 msec", "invalid time unit 'foos'; delay takes a time"),
        ("sizes", "3", "[64, 64]", "not a list; sizes takes a list of integers"),
        ("sizes", "[8, 2.5]", "[64, 64]", "2.5 is not an integer; sizes takes a list of integers"),
        (
            "sizes",
            "(8, 2)",
            "[64, 64]",
            "paren lists are not supported by the Python target: use [a, b]; "
            "sizes takes a list of integers",
        ),
        ("rates", "[1, x]", "[0.5, 1]", "x is not a number; rates takes a list of numbers"),
        ("f", "fast", "{= dict(a=1) =}", "not an LF value; f takes any LF value or {= code =}"),
        ("seed", "", "1", "expected a value; seed takes an integer"),
    ],
)
def test_a_value_of_another_kind_is_refused_with_the_kind_and_the_default(
    name, text, default, problem
):
    with pytest.raises(ValueError) as e:
        argument(name, text, default, where="P.lf:2")
    assert str(e.value) == f"--{name} {text}: {problem} (default {default}, P.lf:2)"


def test_a_declared_type_decides_the_kind():
    assert argument("x", "2.5", "1", "float", "P.lf:2").text == "2.5"
    assert argument("x", "Pong", "1", "str", "P.lf:2").text == '"Pong"'
    with pytest.raises(ValueError, match=r"^--x 1.5: not an integer; x takes an integer "):
        argument("x", "1.5", "1.0", "int", "P.lf:2")


def _param(name: str, default: str) -> MainParameter:
    return MainParameter(name=name, type=None, default=default, file="/a/P.lf", line=3)


def test_options_check_the_kind_and_say_where_the_default_is():
    params = [_param("seed", "1"), _param("learning_rate", "1e-3")]
    o = parse_options(["--seed", "3", "--learning_rate", "1"], parameters=params)
    assert [(a.name, a.text) for a in o.arguments] == [("seed", "3"), ("learning_rate", "1")]
    with pytest.raises(LaunchError) as e:
        parse_options(["--learning_rate", "fast"], parameters=params)
    assert str(e.value) == (
        "--learning_rate fast: not a number; learning_rate takes a number (default 1e-3, P.lf:3)"
    )


def test_an_unknown_option_names_the_close_parameter():
    params = [_param("seed", "1"), _param("learning_rate", "1e-3")]
    with pytest.raises(LaunchError) as e:
        parse_options(["--learning_rat", "0.5"], parameters=params)
    assert str(e.value) == (
        "unknown option '--learning_rat'; did you mean '--learning_rate'? "
        "(the main reactor's parameters are seed, learning_rate)"
    )


def test_values_of_each_kind_reach_the_program(kinds):
    r = run_program(
        kinds,
        *("--seed", "3", "--lr", "1", "--on", "false", "--env_id", "2024-01"),
        *("--delay", "0", "--sizes", "[8]", "--rates", "[1, 2.5]", "--f", "[1]"),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "3 1 False '2024-01' 0 [8] [1, 2.5] [1]\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--seed", "1.5"],
            "--seed 1.5: not an integer; seed takes an integer (default 1, Kinds.lf:2)",
        ),
        (
            ["--lr", "fast"],
            "--lr fast: not a number; lr takes a number (default 1e-3, Kinds.lf:2)",
        ),
        (
            ["--sed", "3"],
            f"unknown option '--sed'; did you mean '--seed'? "
            f"(the main reactor's parameters are {NAMES})",
        ),
        (["-w", "x"], "-w expects a non-negative integer"),
    ],
)
def test_a_command_line_error_is_one_line_and_a_pointer_to_help(kinds, args, message):
    r = run_program(kinds, *args)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"Kinds: error: {message}\nrun ./bin/Kinds --help for the options\n"


def test_help_says_that_target_code_runs(kinds):
    out = run_program(kinds, "--help").stdout
    assert "{= code =} is Python code that the program runs" in out


def test_help_and_errors_are_answered_before_the_modules_imports(tmp_path):
    """A user who asks for --help or mistypes an option is not kept waiting for the
    program's imports (torch: about a second): the preambles do not run at all."""
    src = tmp_path / "Slow.lf"
    src.write_text(
        "target Python { fast: true }\n"
        'preamble {=\nimport sys\nprint("preamble ran", file=sys.stderr)\n=}\n'
        "main reactor Slow(seed = 1) {\n  reaction(startup) {= print(self.seed) =}\n}\n"
    )
    launcher = build(src, tmp_path / "out")
    for args in (["--help"], ["--seed", "1.5"], ["--sed", "2"], ["-w", "2", "--help"]):
        r = run_program(launcher, *args)
        assert "preamble ran" not in r.stderr, (args, r.stderr)
        assert r.returncode == (0 if "--help" in args else 1), (args, r.stderr)
    ran = run_program(launcher, "--seed", "2")
    assert ran.stdout == "2\n" and ran.stderr == "preamble ran\n", ran


def _lfc(tmp_path, *args: str):
    src = tmp_path / "Kinds.lf"
    src.write_text(KINDS)
    return lfc("-o", str(tmp_path / "out"), *args, str(src))


def test_define_checks_the_kind_of_the_value(tmp_path):
    r = _lfc(tmp_path, "-D", "seed=abc")
    assert r.returncode == 1
    assert r.stderr == (
        "lfc: error: -D seed=abc: not an integer; seed takes an integer (default 1, Kinds.lf:2)\n"
        "lfc: 1 error; nothing was built\n"
    )


def test_define_of_an_unknown_name_lists_the_names_and_the_close_one(tmp_path):
    r = _lfc(tmp_path, "-D", "sed=3")
    assert r.returncode == 1
    assert r.stderr == (
        "lfc: error: -D sed=3: the main reactor 'Kinds' has no parameter 'sed'; "
        f"did you mean 'seed'? (its parameters are {NAMES})\n"
        "lfc: 1 error; nothing was built\n"
    )


def test_define_takes_a_bare_word_for_a_string(tmp_path):
    r = _lfc(tmp_path, "-q", "-D", "env_id=Acrobot-v1", "-D", "lr=1")
    assert r.returncode == 0, r.stderr
    out = run_program(tmp_path / "out" / "bin" / "Kinds").stdout
    assert out == "1 1 True 'Acrobot-v1' 5000000 [64, 64] [0.5, 1] {'a': 1}\n"


def test_lfc_command_line_error_is_one_line_and_a_pointer_to_help(tmp_path):
    r = _lfc(tmp_path, "--bogus")
    assert r.returncode == 2
    assert (
        r.stderr == "lfc: error: unrecognized arguments: --bogus\nrun lfc --help for the options\n"
    )
