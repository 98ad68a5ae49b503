"""What README.md and docs/**/*.md tell a user to run works on this checkout: the documented
``tensorboard --logdir runs`` serves, every file, program, make target and option they name
exists, every shown session (``$ command`` and its output) prints what is shown, and a
complete ``.lf`` program in a fenced block compiles (and is the text of the file of its name)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path

import docscan
import pytest
from conftest import ROOT, build, lfc
from docscan import PLACEHOLDER, normal

BIN = Path(sys.executable).parent


@pytest.mark.skipif(
    importlib.util.find_spec("tensorboard") is None, reason="tensorboard (the rl extra) missing"
)
def test_tensorboard_serves_a_log_folder(tmp_path):
    proc = subprocess.Popen(
        [str(BIN / "tensorboard"), "--logdir", str(tmp_path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("TensorBoard ") and " at http" in line:
                break
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()
    assert lines and lines[-1].startswith("TensorBoard "), "".join(lines)[-3000:]


# --------------------------------------------------------------------------- what they name

COMMANDS = docscan.all_commands()


@pytest.fixture(scope="module")
def programs() -> dict[str, Path]:
    """The programs ``make build`` builds, by name: what ``lfc --list-programs`` finds among
    the files of lf_src/, as the Makefile asks."""
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "lf_src").rglob("*.lf"))
    r = lfc("--list-programs", *files)
    assert r.returncode == 0, r.stderr
    return {Path(f).stem: ROOT / f for f in r.stdout.split()}


def test_named_files_exist():
    missing = [f"{where}: {path}" for where, path in docscan.named_paths()]
    missing = [m for m in missing if not (ROOT / m.split(": ", 1)[1]).exists()]
    assert not missing, "files the docs name that do not exist:\n" + "\n".join(missing)


def test_named_programs_are_built_by_make_build(programs):
    named = docscan.named_programs()
    assert {name for _, name in named} >= {"CartPolePPO", "PingPong"}  # the scan finds them
    unknown = [f"{where}: bin/{n}" for where, n in named if n not in {*programs, PLACEHOLDER}]
    assert not unknown, "programs the docs run that make build does not build:\n" + "\n".join(
        unknown
    )


def test_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", makefile, re.M))
    asked = [
        (c.code.where(), a)
        for c in COMMANDS
        if c.tool == "make"
        for a in c.args
        if not a.startswith("-") and "=" not in a
    ]
    assert {"run", "test", "build"} <= {a for _, a in asked}
    unknown = [f"{where}: make {a}" for where, a in asked if a not in targets]
    assert not unknown, "make targets the docs name that the Makefile lacks:\n" + "\n".join(unknown)


def test_named_modules_and_objects_exist():
    named = docscan.named_objects()
    assert len(named) > 20
    unknown = [f"{where}: {dotted}" for where, dotted in named if not docscan.resolves(dotted)]
    assert not unknown, "modules and names the docs give that do not exist:\n" + "\n".join(unknown)


# --------------------------------------------------------------------------- what they run


@pytest.fixture(scope="module")
def launchers(programs, tmp_path_factory) -> dict[str, Path]:
    """The programs the docs run, built by lfc into a temporary folder, by name."""
    out = tmp_path_factory.mktemp("docs")
    named = {c.name for c in COMMANDS if c.tool == "program"} - {PLACEHOLDER}
    return {name: build(programs[name], out) for name in sorted(named & set(programs))}


@pytest.fixture(scope="module")
def ran(launchers) -> dict[str, tuple[int, str]]:
    """(exit status, stdout and stderr) of ``--help`` of lfc, lfc-graph and PingPong, and of
    every ``$ `` session line of the docs, all run at once."""
    runs = {f"help {tool}": [str(BIN / tool), "--help"] for tool in ("lfc", "lfc-graph")}
    runs["help PingPong"] = [str(launchers["PingPong"]), "--help"]
    for c in COMMANDS:
        if c.output and (c.tool != "program" or c.name in launchers):
            head = launchers[c.name] if c.tool == "program" else BIN / c.tool
            runs[f"session {c.code.where()}"] = [str(head), *c.args]
    cwd = launchers["PingPong"].parent.parent
    procs = {
        key: subprocess.Popen(
            cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for key, cmd in runs.items()
    }
    return {key: (p.wait(timeout=120), p.communicate()[0]) for key, p in procs.items()}


def program_help(launcher: Path) -> str:
    """What ``launcher --help`` prints, computed from its graph.json as the launcher does
    (``reactors.options.usage``) without loading its module, and torch with it; the test
    below checks that the two agree on PingPong."""
    from reactors.options import usage
    from reactors.program import Program

    graph = launcher.parent.parent / "src-gen" / launcher.name / "graph.json"
    return usage(Program.load(str(graph)))


def test_a_programs_help_is_its_usage(ran, launchers):
    status, text = ran["help PingPong"]
    assert status == 0 and text.strip() == program_help(launchers["PingPong"]).strip()


def _help_of(ran, launchers, command: docscan.Command) -> set[str]:
    """The options that the ``--help`` of ``command``'s program or tool lists (those of
    every program built, for the placeholder ``Foo``)."""
    if command.tool == "program":
        names = list(launchers) if command.name == PLACEHOLDER else [command.name]
        texts = [program_help(launchers[n]) for n in names]
    elif command.tool == "lf-rl":  # its argparse parser, whose help is what --help prints
        from rl_algos import cli

        parser = cli.parser()
        subcommands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        texts = [subcommands.get(command.name, parser).format_help()]
    else:
        status, text = ran[f"help {command.tool}"]
        assert status == 0, text[-2000:]
        texts = [text]
    return {o for t in texts for o in docscan.help_options(t)}


def test_options_are_those_the_help_lists(ran, launchers):
    checked, unknown = 0, []
    for c in COMMANDS:
        if c.tool in ("make", "tensorboard") or c.output:
            continue  # make targets above; a session is run below
        if c.tool == "program" and c.name not in {*launchers, PLACEHOLDER}:
            continue  # not a program of make build: the test above says so
        known = _help_of(ran, launchers, c)
        checked += len(c.options())
        unknown += [f"{c.code.where()}: {o}" for o in c.options() if normal(o) not in known]
    assert checked > 50
    assert not unknown, "options the docs give that --help does not list:\n" + "\n".join(unknown)


def test_sessions_print_what_the_docs_show(ran):
    sessions = [c for c in COMMANDS if c.output]
    assert sessions
    wrong = []
    for c in sessions:
        if f"session {c.code.where()}" not in ran:
            continue  # not a program of make build: the test above says so
        status, text = ran[f"session {c.code.where()}"]
        if not docscan.shown_pattern(c.output).search(" ".join(text.split())):
            wrong.append(f"{c.code.where()}: shown\n{c.output}\nprinted (status {status})\n{text}")
    assert not wrong, "\n\n".join(wrong)


# --------------------------------------------------------------------------- programs shown


def test_complete_programs_shown_compile_and_are_their_files(tmp_path):
    shown = [
        c
        for c in docscan.all_code()
        if c.block
        and c.lang in ("", "lf")
        and re.search(r"^target \w+", c.text, re.M)
        and re.search(r"^main reactor \w+", c.text, re.M)
        and "..." not in c.text
    ]
    assert shown, "the guide shows a whole program"
    for c in shown:
        name = re.search(r"^main reactor (\w+)", c.text, re.M).group(1)
        files = sorted((ROOT / "lf_src").rglob(f"{name}.lf"))
        if files:
            assert c.text + "\n" == files[0].read_text(), (
                f"{c.where()}: the program shown is not {files[0].relative_to(ROOT)}"
            )
        folder = tmp_path / c.where().replace("/", "_").replace(":", "_")
        folder.mkdir()
        (folder / "lib").symlink_to(ROOT / "lf_src" / "lib")
        (folder / f"{name}.lf").write_text(c.text + "\n")
        build(folder / f"{name}.lf", folder / "out")
