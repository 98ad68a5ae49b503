"""``make build`` builds the programs the compiler finds (files with a main reactor, not files
whose text says "main reactor"), and only those whose inputs changed (``lfc --if-changed``,
``lfc --list-programs``; codegen/incremental.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, lfc

from codegen import cli, incremental

VENV = Path(sys.executable).parent.parent

LIB = """target Python
/* Tick: a library reactor; the main reactor that imports it prints its count. */
reactor Tick(n = 3) {
  output out
  timer t(0, 1 msec)
  state k = 0
  reaction(t) -> out {=
    self.k += 1
    if self.k <= self.n:
      out.set(self.k)
  =}
}
"""
HELLO = """target Python { fast: true, timeout: 5 msec }
import Tick from "lib/Tick.lf"
main reactor Hello(n = 3) {
  tick = new Tick(n = n)
  reaction(tick.out) {=
    print(f"tick {tick.out.value}")
  =}
}
"""
OTHER = """target Python { fast: true, timeout: 1 msec }
main reactor Other {
  reaction(startup) {=
    print("other")
  =}
}
"""


def small_tree(root: Path) -> Path:
    """A project with this checkout's Makefile, two programs and a library whose comment
    names a main reactor."""
    (root / "lf_src" / "lib").mkdir(parents=True)
    (root / "lf_src" / "bench").mkdir()
    shutil.copy(ROOT / "Makefile", root / "Makefile")
    (root / "lf_src" / "lib" / "Tick.lf").write_text(LIB)
    (root / "lf_src" / "Hello.lf").write_text(HELLO)
    (root / "lf_src" / "bench" / "Other.lf").write_text(OTHER)
    return root


def make_build(root: Path) -> subprocess.CompletedProcess:
    """``make build`` in ``root`` with this checkout's environment (``-o`` leaves the set-up
    targets alone: the .venv is not in the copy)."""
    cmd = ["make", "-C", str(root), "-o", "install", "-o", "native", "build", f"VENV={VENV}"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def mtimes(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for p in sorted((root / "src-gen").rglob("*"))
        if p.is_file()
    }


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_build_builds_the_programs_and_then_only_what_changed(tmp_path):
    root = small_tree(tmp_path / "proj")
    first = make_build(root)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "no main reactor" not in first.stdout + first.stderr
    assert sorted(os.listdir(root / "bin")) == ["Hello", "Other"]
    assert "built bin/Hello" in first.stderr and "built bin/Other" in first.stderr
    built = mtimes(root)

    second = make_build(root)
    assert second.returncode == 0, second.stderr
    assert "lfc: bin/Hello is up to date" in second.stderr
    assert "lfc: bin/Other is up to date" in second.stderr
    assert "built" not in second.stderr
    assert mtimes(root) == built  # nothing was written again

    tick = root / "lf_src" / "lib" / "Tick.lf"
    tick.write_text(LIB.replace("self.k <= self.n", "self.k <= self.n + 1"))
    third = make_build(root)
    assert third.returncode == 0, third.stderr
    assert "built bin/Hello" in third.stderr and "lfc: bin/Other is up to date" in third.stderr
    run = subprocess.run([str(root / "bin" / "Hello")], capture_output=True, text=True)
    assert run.stdout.split() == ["tick", "1", "tick", "2", "tick", "3", "tick", "4"]


def test_list_programs_asks_the_compiler(tmp_path):
    root = small_tree(tmp_path / "proj")
    files = sorted(str(p) for p in (root / "lf_src").rglob("*.lf"))
    r = lfc("--list-programs", *files)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        str(root / "lf_src" / "Hello.lf"),
        str(root / "lf_src" / "bench" / "Other.lf"),
    ]
    bad = root / "lf_src" / "Bad.lf"
    bad.write_text("target Python\nmain reactor Bad {\n  input\n}\n")
    r = lfc("--list-programs", str(bad), files[0])
    assert r.returncode == 1 and r.stdout.splitlines() == [files[0]]
    assert r.stderr.startswith(f"{bad}:4:1: error:") and "Traceback" not in r.stderr


def build_quietly(*args: str) -> int:
    return cli.main(["-q", "--if-changed", *args])


def test_options_the_compiler_and_outputs_decide_a_rebuild(tmp_path, monkeypatch, capsys):
    root = small_tree(tmp_path / "proj")
    hello, out = str(root / "lf_src" / "Hello.lf"), str(tmp_path / "out")
    module = tmp_path / "out" / "src-gen" / "Hello" / "Hello.py"

    def written() -> tuple[int, int] | None:  # a build replaces the module: another inode
        return (module.stat().st_ino, module.stat().st_mtime_ns) if module.exists() else None

    def rebuilt(*args: str) -> bool:
        before = written()
        assert build_quietly("-o", out, *args, hello) == 0, capsys.readouterr().err
        return written() != before

    assert rebuilt()
    assert not rebuilt()
    assert rebuilt("-D", "n=2") and not rebuilt("-D", "n=2")
    assert rebuilt()
    assert cli.main(["-q", "-o", out, hello]) == 0  # a build without --if-changed: stamped
    assert not rebuilt()
    assert rebuilt("--timeout", "2 msec") and not rebuilt("--timeout", "2 msec")
    assert rebuilt()  # back to the file's own timeout
    (tmp_path / "out" / "bin" / "Hello").unlink()
    assert rebuilt()
    os.utime(root / "lf_src" / "lib" / "Tick.lf")  # touched, the same text
    assert not rebuilt()
    monkeypatch.setattr(incremental, "compiler_digest", lambda: "another compiler")
    assert rebuilt() and not rebuilt()


def test_a_failed_build_leaves_no_stamp(tmp_path, capsys):
    root = small_tree(tmp_path / "proj")
    hello, out = root / "lf_src" / "Hello.lf", str(tmp_path / "out")
    stamp = tmp_path / "out" / "src-gen" / "Hello" / incremental.STAMP
    assert build_quietly("-o", out, str(hello)) == 0 and stamp.exists()
    hello.write_text(HELLO.replace('print(f"tick', 'print(f"tick" +'))
    assert build_quietly("-o", out, str(hello)) == 1
    assert not stamp.exists()
    hello.write_text(HELLO)
    assert build_quietly("-o", out, str(hello)) == 0 and stamp.exists()
    capsys.readouterr()


def test_the_compiler_digest_covers_the_runtime_modules_the_compiler_imports():
    """A build is out of date when a runtime module that the compiler imports changes, in
    whichever subpackage of ``reactors`` it lives (the packages' ``__init__`` run too); the
    modules that only a running program imports (the launcher, the workers) do not count."""
    files = {os.path.relpath(f, ROOT) for f in incremental.compiler_files()}
    for needed in (
        "reactors/__init__.py",
        "reactors/api.py",
        "reactors/core/__init__.py",
        "reactors/core/tag.py",  # codegen.units
        "reactors/core/reactor.py",  # codegen.scope
        "reactors/model/program.py",  # codegen.compiler
        "reactors/parallel/placement.py",  # codegen.compiler
        "reactors/parallel/topology.py",  # imported by placement
    ):
        assert needed in files, needed
    assert "reactors/launch/main.py" not in files  # only reactors.api's calls import it
    assert "reactors/parallel/supervisor.py" not in files
