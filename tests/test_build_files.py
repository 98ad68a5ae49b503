"""The files lfc writes: atomic replacement, matching build ids, a shell-safe launcher."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest
from conftest import build, run_program
from test_cli import COUNTER, write

from codegen import emit


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "graph.json"
    target.write_text("old")

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(emit.os, "replace", full_disk)
    with pytest.raises(OSError):
        emit._write(str(target), "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.json"]
    assert target.read_text() == "old"


def test_writes_go_through_unique_temporary_files(tmp_path, monkeypatch):
    names: list[str] = []
    real_replace = emit.os.replace

    def record(src, dst):
        names.append(str(src))
        real_replace(src, dst)

    monkeypatch.setattr(emit.os, "replace", record)
    for text in ("a", "b"):
        emit._write(str(tmp_path / "graph.json"), text)
    assert len(set(names)) == 2 and all(Path(n).parent == tmp_path for n in names)
    assert (tmp_path / "graph.json").read_text() == "b"


def test_a_module_and_graph_of_two_builds_are_refused(tmp_path):
    first = build(write(tmp_path / "a", "Counter", COUNTER), tmp_path / "out1")
    other = COUNTER.replace('print(f"ticks=', 'print(f"other ticks=')
    build(write(tmp_path / "b", "Counter", other), tmp_path / "out2")
    shutil.copy(
        tmp_path / "out2" / "src-gen" / "Counter" / "graph.json",
        tmp_path / "out1" / "src-gen" / "Counter" / "graph.json",
    )
    r = run_program(first)
    assert r.returncode != 0
    assert "ticks" not in r.stdout
    assert "rebuild" in r.stderr and "graph.json" in r.stderr


def test_the_same_build_twice_has_the_same_files(tmp_path):
    src = write(tmp_path / "a", "Counter", COUNTER)
    build(src, tmp_path / "out1")
    build(src, tmp_path / "out2")
    for name in ("Counter.py", "graph.json"):
        one = (tmp_path / "out1" / "src-gen" / "Counter" / name).read_text()
        two = (tmp_path / "out2" / "src-gen" / "Counter" / name).read_text()
        assert one.replace(str(tmp_path / "out1"), "") == two.replace(str(tmp_path / "out2"), "")


@pytest.mark.parametrize("folder", ["we`touch pwned`ird", 'quo"te', "dollar$HOME", "sp ace'q"])
def test_the_launcher_runs_from_a_folder_with_shell_characters(tmp_path, folder):
    root = tmp_path / folder
    launcher = build(write(root / "src", "Counter", COUNTER), root)
    r = run_program(launcher)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ticks=11 at=1000000000"
    assert not any(p.name == "pwned" for p in tmp_path.rglob("pwned"))
