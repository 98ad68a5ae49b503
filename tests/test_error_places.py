"""Errors of target code are located at their ``.lf`` line, never in src-gen, and said once."""

from __future__ import annotations

import re

import pytest
from conftest import build, lfc, run_program
from test_cli import write

HEAD = "target Python\n"

CASES = [
    # (program after the target line, message fragment, line, column)
    (
        "reactor A { input self  reaction(self) {= pass =} }\nmain reactor Main { a = new A() }",
        "'self' names the reactor in target code and cannot name a port",
        2,
        13,
    ),
    (
        "main reactor Main { timer self  reaction(self) {= pass =} }",
        "cannot name a timer",
        2,
        21,
    ),
    (
        "reactor A(x = {= (1, 2 =}) {}\nmain reactor Main { a = new A() }",
        "Python syntax error in target code",
        2,
        None,  # the line is what matters; the column is where Python noticed
    ),
]


@pytest.mark.parametrize("body,message,line,col", CASES, ids=[c[1] for c in CASES])
def test_target_code_error_is_located_in_the_lf_file(tmp_path, body, message, line, col):
    src = write(tmp_path, "Main", HEAD + body)
    r = lfc("-q", "-o", str(tmp_path / "out"), str(src))
    assert r.returncode == 1
    where = f"{src}:{line}:{col}: error: " if col else f"{src}:{line}:"
    assert where in r.stderr and message in r.stderr, r.stderr
    assert "src-gen" not in r.stderr and r.stderr.count("error:") == 1, r.stderr


IMPORT = """target Python
preamble {=
  import no_such_module_xyz
=}
main reactor Imp {
  reaction(startup) {=
    print("hi")
  =}
}
"""


def test_a_failing_preamble_import_is_reported_at_its_lf_line_once(tmp_path):
    src = write(tmp_path / "src", "Imp", IMPORT)
    r = run_program(build(src, tmp_path))
    assert r.returncode == 1
    assert f"loading the program failed at {src}:3" in r.stderr
    assert r.stderr.count("No module named 'no_such_module_xyz'") == 1
    assert "src-gen" not in r.stderr and "hi" not in r.stdout


SPREAD = """target Python
reactor A(x = 0) {
  state y = {= (
    1,
    STATE) =}
}
main reactor Spread {
  a = new A(x = {= max(
      0,
      ASSIGNED) =})
}
"""


@pytest.mark.parametrize("where", ["assignment", "state", "first line"])
def test_an_error_in_a_code_block_of_several_lines_is_located_at_its_line(tmp_path, where):
    """A parameter or state initialiser written as ``{= ... =}`` over several lines: its failure
    names the ``.lf`` line of the line that raised, not a line of the generated module (a call
    that starts on the block's first line raises there)."""
    bad = 'int("not a number")'
    text = SPREAD.replace("STATE", bad if where == "state" else "2")
    text = text.replace("ASSIGNED", bad if where == "assignment" else "3")
    if where == "first line":
        text = text.replace("{= max(", "{= int(").replace("0,\n      3", '"nor this"')
    src = write(tmp_path / "src", "Spread", text)
    r = run_program(build(src, tmp_path))
    assert r.returncode == 1, r.stderr
    line = {"assignment": 10, "state": 5, "first line": 8}[where]
    assert re.search(rf"failed at {re.escape(str(src))}:{line}\b", r.stderr), r.stderr
    assert "src-gen" not in r.stderr, r.stderr
