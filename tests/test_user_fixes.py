"""Defects a new user met: target-code errors located in imported programs, the built
program's ``--help``, and the viewer's header. (``make install``'s output is checked by hand:
it needs a fresh virtual environment.)"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from conftest import ROOT, build, lfc, run_program

from codegen.compiler import compile_file
from codegen.diagnostics import Reporter
from codegen.viewer import Diagram, render, workers_text
from reactors.launch.options import usage
from reactors.model.program import MainParameter, Program, WorkerChoice, load

LOGGER = ROOT / "lf_src" / "lib" / "Logger.lf"

# A library with a file-level preamble, a reactor-level preamble (a method) and a reaction.
HELPER = """target Python

preamble {=
import math
SCALE = 2
=}

reactor Helper(k = 3) {
  preamble {=
    def twice(self, v):
        return 2 * v // self.k
  =}
  input inp
  output out
  reaction(inp) -> out {=
    out.set(self.twice(inp.value) * SCALE)
  =}
}
"""

# Another library with the same base name, in another folder.
OTHER = """target Python

reactor Other {
  input inp
  reaction(inp) {=
    values = [1, 2]
    print(values[inp.value])
  =}
}
"""

MAIN = """target Python { fast: true }

import Helper from "lib/Helper.lf"
import Other from "other/Helper.lf"

preamble {=
import os
=}

main reactor Main(K = 3) {
  h = new Helper(k = K)
  o = new Other()
  reaction(startup) -> h.inp {=
    h.inp.set(1)
  =}
  h.out -> o.inp
}
"""


def project(tmp_path: Path, main: str = MAIN, helper: str = HELPER) -> Path:
    """``tmp_path`` with Main.lf, lib/Helper.lf and other/Helper.lf; returns Main.lf."""
    (tmp_path / "lib").mkdir(parents=True, exist_ok=True)
    (tmp_path / "other").mkdir(exist_ok=True)
    (tmp_path / "lib" / "Helper.lf").write_text(helper)
    (tmp_path / "other" / "Helper.lf").write_text(OTHER)
    src = tmp_path / "Main.lf"
    src.write_text(main)
    return src


def line_of(path: Path, text: str) -> int:
    """The 1-based line of ``path`` holding ``text``."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def error_lines(stderr: str) -> list[str]:
    """The ``error:`` line of lfc's report and the two lines after it (source, caret)."""
    lines = stderr.splitlines()
    i = next(i for i, line in enumerate(lines) if ": error: " in line)
    return lines[i : i + 3]


# --------------------------------------------------------------------------- target-code errors


def test_syntax_error_beside_an_imported_library_is_located_in_the_users_file(tmp_path):
    src = tmp_path / "Main.lf"
    src.write_text(
        f'target Python\n\nimport EpisodeLogger from "{LOGGER}"\n\n'
        "preamble {=\nimport math\n=}\n\n"
        "main reactor {\n  timer t\n  reaction(t) {=\n    x = 1\n    if x ==:\n"
        "      print(x)\n  =}\n}\n"
    )
    r = lfc("-o", str(tmp_path / "out"), str(src))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    head, source, caret = error_lines(r.stderr)
    assert head == f"{src}:13:12: error: Python syntax error in target code: invalid syntax"
    assert source == "    if x ==:" and caret == " " * 11 + "^"


def test_syntax_error_in_an_imported_file_is_located_in_that_file(tmp_path):
    src = project(tmp_path, helper=HELPER.replace("out.set(self.twice(", "out.set(self.twice(("))
    r = lfc("-o", str(tmp_path / "out"), str(src))
    lib = tmp_path / "lib" / "Helper.lf"
    head, source, caret = error_lines(r.stderr)
    assert head.startswith(f"{lib}:{line_of(lib, 'out.set(')}:12: error: Python syntax error")
    assert source.strip().startswith("out.set(") and caret == " " * 11 + "^"


def test_syntax_errors_in_preambles_are_located(tmp_path):
    for old, new, file, col in [
        ("import os\n", "import os os\n", "Main.lf", 11),  # file-level preamble, main file
        ("SCALE = 2\n", "SCALE = = 2\n", "lib/Helper.lf", 9),  # file-level, imported
        ("return 2 * v", "return 2 * * v", "lib/Helper.lf", 20),  # reactor-level, imported
    ]:
        main, helper = MAIN.replace(old, new), HELPER.replace(old, new)
        r = lfc("-o", str(tmp_path / "out"), str(project(tmp_path, main, helper)))
        path = tmp_path / file
        head, source, caret = error_lines(r.stderr)
        assert head.startswith(f"{path}:{line_of(path, new.strip())}:{col}: error:"), r.stderr
        assert source.strip().startswith(new.strip()) and caret.index("^") == col - 1


def test_lines_named_in_a_python_message_are_lf_lines(tmp_path):
    src = project(tmp_path, main=MAIN.replace("    h.inp.set(1)\n", "    if True:\n"))
    r = lfc("-o", str(tmp_path / "out"), str(src))
    head = error_lines(r.stderr)[0]
    assert f"after 'if' statement on line {line_of(src, 'if True:')}" in head, head


def test_line_map_ranges_are_disjoint_and_inside_their_files(tmp_path):
    src = project(tmp_path)
    compile_file(str(src), Reporter(), str(tmp_path / "out"), None, no_compile=True)
    graph = json.loads((tmp_path / "out" / "src-gen" / "Main" / "graph.json").read_text())
    ranges = sorted(graph["line_map"])
    for (_, last, *_), (first, *_) in zip(ranges, ranges[1:]):
        assert last < first, ranges
    for first, last, file, lf_line in ranges:
        assert lf_line + last - first <= len(Path(file).read_text().splitlines()), (file, first)
    assert {f for *_, f, _ in ranges} == {
        str(src),
        str(tmp_path / "lib" / "Helper.lf"),
        str(tmp_path / "other" / "Helper.lf"),
    }


def test_runtime_errors_name_the_file_and_line_of_imported_reactors(tmp_path):
    # Helper(k = 0) divides by zero in its reactor-level preamble.
    r = run_program(build(project(tmp_path), tmp_path / "out", "-D", "K=0"))
    lib = tmp_path / "lib" / "Helper.lf"
    assert r.returncode == 1 and "ZeroDivisionError" in r.stderr
    assert f'File "{lib}", line {line_of(lib, "return 2 * v")}, in twice' in r.stderr
    assert f'File "{lib}", line {line_of(lib, "out.set(")}, in reaction 1' in r.stderr
    # other/Helper.lf shares lib/Helper.lf's base name; its reaction indexes out of range.
    r = run_program(build(project(tmp_path), tmp_path / "out2", "-D", "K=1"))
    other = tmp_path / "other" / "Helper.lf"
    assert r.returncode == 1 and "IndexError" in r.stderr
    assert f"failed at {other}:{line_of(other, 'print(values')}" in r.stderr
    assert f'File "{other}", line {line_of(other, "print(values")}' in r.stderr


# --------------------------------------------------------------------------- the program's --help

PARAMS = """target Python { fast: true }

main reactor Prog(steps = 100, lr = 0.001, period = 100 msec, name = "cart", sizes = [64, 64],
                  f = {= dict(a=1) =}) {
  reaction(startup) {= print(self.steps) =}
}
"""


def test_help_names_the_program_and_lists_the_main_parameters(tmp_path):
    src = tmp_path / "Prog.lf"
    src.write_text(PARAMS)
    r = run_program(build(src, tmp_path / "out"), "--help")
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0] == "usage: Prog [options]" and ".py" not in r.stdout
    assert any(line.lstrip().startswith("-w, --workers") for line in lines)
    i = lines.index(
        "Parameters of the main reactor Prog (--NAME VALUE when it starts, "
        "lfc -D NAME=VALUE when compiled):"
    )
    params = [line.split("  (")[0].strip() for line in lines[i + 1 :]]
    assert params == [
        "steps = 100",
        "lr = 0.001",
        "period = 100 msec",
        'name = "cart"',
        "sizes = [64, 64]",
        "f = {= dict(a=1) =}",
    ]
    assert lines[i + 1].endswith("(Prog.lf:3)") and lines[-1].endswith("(Prog.lf:4)")


def test_help_shows_the_values_compiled_in_and_bad_options_point_to_it(tmp_path):
    src = tmp_path / "Prog.lf"
    src.write_text(PARAMS)
    launcher = build(src, tmp_path / "out", "-D", "steps=7")
    assert "  steps = 7 " in run_program(launcher, "-h").stdout
    r = run_program(launcher, "--bogus")
    assert r.returncode == 1 and "unknown option '--bogus'" in r.stderr
    assert r.stderr.endswith("\nrun ./bin/Prog --help for the options\n")
    assert "usage: Prog [options]" not in r.stderr


def test_graph_json_lists_the_main_parameters(tmp_path):
    src = tmp_path / "Prog.lf"
    src.write_text(PARAMS)
    compile_file(str(src), Reporter(), str(tmp_path / "out"), None, no_compile=True)
    graph = json.loads((tmp_path / "out" / "src-gen" / "Prog" / "graph.json").read_text())
    assert graph["main_parameters"][2] == {
        "name": "period",
        "type": None,
        "default": "100 msec",
        "file": str(src),
        "line": 3,
        "fixed": "",
        "doc": "",
    }


def test_usage_without_parameters_lists_only_the_options():
    text = usage(Program(name="Bare", reactors=(), reactions=()))
    assert text.startswith("usage: Bare [options]\n") and "Parameters" not in text
    n = MainParameter(name="n", type="int", default="3", file="T.lf", line=2)
    typed = usage(Program(name="T", reactors=(), reactions=(), main_parameters=(n,)))
    assert typed.splitlines()[-1].startswith("  n: int = 3  (")


# --------------------------------------------------------------------------- viewer header


def test_viewer_header_says_what_the_number_of_workers_means(tmp_path):
    assert workers_text(0) == "one worker per core (chosen at run time)"
    assert (workers_text(1), workers_text(2)) == ("1 worker", "2 workers")
    src = tmp_path / "Prog.lf"
    src.write_text(PARAMS.replace("{ fast: true }", "{ fast: true, workers: 0 }"))
    compile_file(str(src), Reporter(), str(tmp_path / "out"), None, no_compile=True)
    graph = load(str(tmp_path / "out" / "src-gen" / "Prog" / "graph.json"))
    assert Diagram(graph).to_dict()["workers_text"] == "one worker per core (chosen at run time)"
    assert "DATA.workers_text, DATA.fast" in render(graph)
    chosen = WorkerChoice(2, "predicted time per tag: 1 worker(s) 9.0 us, 2 worker(s) 5.0 us")
    header = Diagram(dataclasses.replace(graph, worker_choice=chosen)).to_dict()["workers_text"]
    assert header.endswith(
        "; the latest -w 0 run chose 2: predicted time per tag: 1 worker(s) 9.0 us, 2 worker(s) 5.0 us"
    )
