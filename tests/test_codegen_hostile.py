"""Hostile paths and names never become code: every path or name lfc writes into the generated
module (its header, docstrings, ``.lf`` markers, the launcher) is a literal or escaped text.

A folder whose name holds a newline and Python code, quotes, a backslash, ``\"\"\"``, ``{{`` and
``#``, and an imported file whose name holds ``\\N``, a quote and ``{{#}}``: the program builds,
runs, prints its value, runs no code of the names, and a failing reaction is still reported at
its ``.lf`` line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import lfc, run_program
from lfsrc import errors_of

#: A project folder whose name would run ``open("PWN", "w")`` if it reached the module as code.
HOSTILE_DIR = 'x\nopen("PWN","w")\n#"""{{ \\N \' \r#\x0c\u2028end'


MAIN = """target Python { fast: true }
import Greeter from "lib/W\\N'{{#}}.lf"
main reactor Hello(fail = false) {
  g = new Greeter()
  reaction(g.out) {=
    print("got", g.out.value)
    if self.fail:
      raise ValueError("boom")
  =}
}
"""

LIB = """target Python
reactor Greeter {
  output out
  reaction(startup) -> out {=
    out.set(42)
  =}
}
"""


def _project(tmp_path: Path, lib_name: str = "W\\N'{{#}}.lf") -> Path:
    src = tmp_path / HOSTILE_DIR / "src"
    (src / "lib").mkdir(parents=True)
    (src / "lib" / lib_name).write_text(LIB, encoding="utf-8")
    main = src / "Hello.lf"
    main.write_text(MAIN.replace("W\\N'{{#}}.lf", lib_name), encoding="utf-8")
    return main


#: The imported file: a plain name (the folder alone is hostile), then a name with ``\\N``, a
#: quote, ``{{`` and ``#`` (which reaches the class docstring and the ``.lf`` markers).
LIB_NAMES = ["Lib.lf", "W\\N'{{#}}.lf"]


@pytest.mark.parametrize("lib_name", LIB_NAMES, ids=["plain-lib", "hostile-lib"])
def test_hostile_folder_and_file_names_build_and_run_no_code(tmp_path, lib_name):
    main = _project(tmp_path, lib_name)
    built = lfc(str(main), cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    launcher = tmp_path / HOSTILE_DIR / "bin" / "Hello"
    module = tmp_path / HOSTILE_DIR / "src-gen" / "Hello" / "Hello.py"
    text = module.read_text(encoding="utf-8")
    lines = text.split("\n")
    assert repr(str(main)) in lines[1]  # the header names the file as one literal
    assert not any(line.startswith('open("PWN"') for line in lines)
    ran = run_program(launcher, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["got 42"]
    assert not list(tmp_path.rglob("PWN")) and not (launcher.parent.parent / "PWN").exists()


@pytest.mark.parametrize("lib_name", LIB_NAMES, ids=["plain-lib", "hostile-lib"])
def test_a_failing_reaction_is_reported_at_its_lf_line_under_hostile_names(tmp_path, lib_name):
    main = _project(tmp_path, lib_name)
    assert lfc(str(main), cwd=tmp_path).returncode == 0
    ran = run_program(tmp_path / HOSTILE_DIR / "bin" / "Hello", "--fail", "true", timeout=60)
    assert ran.returncode == 1
    assert "Hello.lf:8" in ran.stderr and "boom" in ran.stderr, ran.stderr
    assert not list(tmp_path.rglob("PWN"))


def test_a_file_name_that_is_no_name_cannot_name_the_main_reactor(tmp_path):
    """An unnamed main reactor takes the file's name, which becomes a class name: a file name
    that is no identifier is a located error, never code."""
    src = tmp_path / 'A(ReactorBase):\n    pass\nopen("PWN", "w")\nclass B.lf'
    src.write_text("target Python\nmain reactor {\n  reaction(startup) {= pass =}\n}\n")
    built = lfc(str(src), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert built.returncode == 1
    shown = str(src).replace("\n", "\\n")  # the path is shown on one line, escaped
    assert f"{shown}:2:1: error: " in built.stderr, built.stderr
    assert "is not a name" in built.stderr
    assert not (tmp_path / "out").exists() and not list(tmp_path.rglob("PWN"))


# --------------------------------------------------------------------------- what lfc reads

MINIMAL = "target Python\nmain reactor {\n  reaction(startup) {= print('hi') =}\n}\n"


def _not_regular(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "Main.lf"
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")
    return path


@pytest.mark.parametrize(
    "kind, shown", [("FIFO", "a FIFO"), ("directory", "a directory"), ("device", "a device")]
)
def test_a_main_file_that_is_not_a_regular_file_is_refused(tmp_path, kind, shown):
    """A FIFO would block the read, a link to /dev/zero never ends: lfc refuses both at once."""
    path = _not_regular(tmp_path, kind)
    built = lfc(str(path), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert built.returncode == 1
    assert built.stderr.startswith(f"lfc: error: cannot read '{path}': it is {shown}"), built.stderr
    assert "Traceback" not in built.stderr


@pytest.mark.parametrize("kind, shown", [("FIFO", "a FIFO"), ("device", "a device")])
def test_an_imported_file_that_is_not_a_regular_file_is_refused_at_the_import(
    tmp_path, kind, shown
):
    lib = tmp_path / "lib"
    lib.mkdir()
    _not_regular(lib, kind)
    main = tmp_path / "Hello.lf"
    main.write_text('target Python\nimport A from "lib/Main.lf"\n' + MINIMAL.split("\n", 1)[1])
    built = lfc(str(main), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert built.returncode == 1
    assert built.stderr.startswith(
        f"{main}:2:1: error: cannot read '{lib / 'Main.lf'}': it is {shown}"
    ), built.stderr


def test_a_file_larger_than_the_maximum_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr("codegen.sources.MAX_SOURCE_BYTES", 1000)
    assert errors_of(tmp_path, MINIMAL + "// padding\n" * 100) == [
        f"lfc: error: cannot read '{tmp_path / 'Main.lf'}': it has {len(MINIMAL) + 1100:,} bytes, "
        "more than the maximum of 1,000 for a .lf file"
    ]


def test_a_nul_in_a_body_is_located_in_the_lf_file(tmp_path):
    text = "target Python\nmain reactor {\n  reaction(startup) {=\n    x = 1\0\n  =}\n}\n"
    (error,) = errors_of(tmp_path, text)
    path = tmp_path / "Main.lf"
    assert error.splitlines() == [
        f"{path}:4:10: error: a NUL character (byte 0x00) cannot stand in a .lf file (Python "
        "code cannot hold one; write '\\0' in a string)",
        "    x = 1\\x00",
        "         ^",
    ]


def test_control_characters_of_a_source_line_are_shown_escaped(tmp_path):
    """An ANSI escape sequence (or a bidirectional override) in an echoed line is shown as
    its escape, never sent to the terminal, and the caret stays under the character."""
    text = "target Python\nmain reactor {\n  // \x1b[2J\u202e\n  reaction(startup) -> \x1b[31mout {= pass =}\n}\n"
    errors = errors_of(tmp_path, text)
    assert errors and all("\x1b" not in e and "\u202e" not in e for e in errors), errors
    head, line, caret = errors[0].splitlines()
    assert head.startswith(f"{tmp_path / 'Main.lf'}:4:24: error: unexpected character")
    assert line == "  reaction(startup) -> \\x1b[31mout {= pass =}"
    assert caret.index("^") == line.index("\\x1b")


@pytest.mark.parametrize(
    "name, problem",
    [
        ("pipe", "is a FIFO (named pipe)"),
        ("data", "holds 'zero', which is a device (character special file)"),
    ],
)
def test_a_file_to_copy_that_is_not_a_regular_file_or_folder_is_refused(tmp_path, name, problem):
    """The ``files`` target property copies files beside the module: a FIFO, or a link to a
    device in a folder (whose copy would never end), is refused before anything is written."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "zero").symlink_to("/dev/zero")
    main = tmp_path / "Main.lf"
    main.write_text(f'target Python {{ files: ["{name}"] }}\n' + MINIMAL.split("\n", 1)[1])
    built = lfc(str(main), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert built.returncode == 1
    assert built.stderr.startswith(
        f"{main}:1:1: error: file '{name}' named in the 'files' target property {problem}, "
        "not a regular file or a folder"
    ), built.stderr
    assert not (tmp_path / "out").exists()


def test_line_breaks_python_does_not_count_stay_inside_a_body(tmp_path):
    """A form feed and U+2028 inside a string of a body stay in the string, and the line map
    still names the .lf line of a failing statement after them."""
    main = tmp_path / "Main.lf"
    main.write_text(
        "target Python\nmain reactor {\n  reaction(startup) {=\n"
        '    print(repr("a\x0cb\u2028c"))\n    raise ValueError("boom")\n  =}\n}\n',
        encoding="utf-8",
    )
    assert lfc(str(main), "-o", str(tmp_path / "out"), cwd=tmp_path).returncode == 0
    ran = run_program(tmp_path / "out" / "bin" / "Main", timeout=60)
    assert ran.returncode == 1 and ran.stdout.splitlines() == ["'a\\x0cb\\u2028c'"], ran
    assert "Main.lf:5" in ran.stderr and "boom" in ran.stderr, ran.stderr
