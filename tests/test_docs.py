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
    (``reactors.launch.options.usage``) without loading its module, and torch with it; the test
    below checks that the two agree on PingPong."""
    from reactors.launch.options import usage
    from reactors.model.program import Program

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
    shown = [(c, name) for c in docscan.all_code() if (name := docscan.program_shown(c))]
    assert shown, "the guide shows a whole program"
    for c, name in shown:
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


# --------------------------------------------------------------------------- the front door

README = ROOT / "README.md"
DOCS_DIR = ROOT / "docs"


def test_readme_is_a_front_door(programs):
    """The README fits in about four screens: set-up first, then a whole program that a user
    can build, with what it prints (run by the test of sessions above), then a link to each
    page of docs/, where everything else is."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    head = "\n".join(lines[:8])
    assert lines[0].startswith("# ") and "On a fresh machine:" in head, head
    for target in ("run", "test"):
        assert re.search(rf"^ {{4}}make {target} +# \w", head, re.M), f"make {target} not on top"
    names = [name for c in docscan.code_of(README) if (name := docscan.program_shown(c))]
    assert names, "README.md shows no complete program"
    assert names[0] in programs, f"{names[0]} is not a program of lf_src/ that make build builds"
    sessions = [c for c in COMMANDS if c.code.doc == README and c.output and c.name == names[0]]
    assert sessions, f"README.md shows no $ ./bin/{names[0]} and what it prints"
    linked = {link.file() for link in docscan.links_of(README)}
    unlinked = sorted(p.name for p in DOCS_DIR.glob("*.md") if p.resolve() not in linked)
    assert not unlinked, f"pages of docs/ that README.md does not link: {unlinked}"


def test_links_resolve():
    """Every relative link of the README and of docs/ reaches a file, and its ``#anchor`` a
    heading both on GitHub and on the site (``make docs``: Python-Markdown's anchors); a page
    of docs/ links only within docs/, the site's pages (a source file is named as code)."""
    from markdown.extensions.toc import slugify

    def site_anchor(heading: str) -> str:
        return slugify(heading, "-")

    checked, broken = 0, []
    for doc in docscan.DOCS:
        for link in docscan.links_of(doc):
            checked += 1
            target = link.file()
            if doc.is_relative_to(DOCS_DIR) and not target.is_relative_to(DOCS_DIR):
                broken.append(f"{link.where()}: {link.path} is outside docs/, not on the site")
            elif not target.exists():
                broken.append(f"{link.where()}: {link.path} does not exist")
            elif link.anchor and target.suffix == ".md":
                for slug in (docscan.github_anchor, site_anchor):
                    if link.anchor not in docscan.anchors_of(target, slug):
                        broken.append(
                            f"{link.where()}: no heading of {target.name} has the "
                            f"anchor #{link.anchor} ({slug.__name__})"
                        )
    assert checked > 30, checked
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)
