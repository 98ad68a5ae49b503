"""Run directories: one per run, even for runs started in the same millisecond; the
reactors of one run agree on theirs; a full disk while saving a model names ENOSPC and
the path."""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from reactors.core.context import new_run_id
from rl_algos import runlog

START_NS = 1_700_000_000_123_456_789  # every run below starts in the same millisecond


def _make(root: str) -> str:
    return runlog.run_directory("Prog", START_NS, new_run_id(), root)


def test_concurrent_runs_in_threads_get_distinct_directories(tmp_path):
    with ThreadPoolExecutor(max_workers=16) as pool:
        dirs = list(pool.map(_make, [str(tmp_path)] * 40))
    assert len(set(dirs)) == 40
    assert len(os.listdir(tmp_path / "Prog")) == 40


def test_concurrent_runs_in_processes_get_distinct_directories(tmp_path):
    with mp.get_context("spawn").Pool(4) as pool:
        dirs = pool.map(_make, [str(tmp_path)] * 40)
    assert len(set(dirs)) == 40
    assert len(os.listdir(tmp_path / "Prog")) == 40


def test_reactors_of_one_run_share_its_directory(tmp_path):
    run_id = new_run_id()
    with ThreadPoolExecutor(max_workers=8) as pool:
        dirs = list(
            pool.map(
                lambda _: runlog.run_directory("Prog", START_NS, run_id, str(tmp_path)), range(20)
            )
        )
    assert len(set(dirs)) == 1
    assert dirs[0].endswith("-" + run_id[:8])
    assert os.listdir(tmp_path / "Prog") == [os.path.basename(dirs[0])]


def test_a_run_finds_its_directory_whatever_its_start_time(tmp_path):
    """A resumed run that waits for physical time starts later than the run it continues:
    its reactors still find the directory the run made."""
    run_id = new_run_id()
    first = runlog.run_directory("Prog", START_NS, run_id, str(tmp_path))
    later = runlog.run_directory("Prog", START_NS + 3_600_000_000_000, run_id, str(tmp_path))
    assert later == first
    assert os.listdir(tmp_path / "Prog") == [os.path.basename(first)]


def test_directory_of_another_run_with_the_same_short_id_is_refused(tmp_path):
    first = "abcdef01" + "0" * 24
    runlog.run_directory("Prog", START_NS, first, str(tmp_path))
    with pytest.raises(FileExistsError, match="belongs to run"):
        runlog.run_directory("Prog", START_NS, "abcdef01" + "1" * 24, str(tmp_path))


def test_disk_full_while_saving_names_enospc_and_path(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")

    def full(obj, f, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    path = str(tmp_path / "model.pt")
    with pytest.raises(OSError) as info:
        runlog.atomic_save({"w": 1}, path)
    assert info.value.errno == errno.ENOSPC
    assert "ENOSPC" in str(info.value) and path in str(info.value)
    assert os.listdir(tmp_path) == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


TWO_WRITERS = """target Python { timeout: 0 s }

preamble {=
import os
from rl_algos.runlog import program_name, run_directory
=}

reactor Writer {
  reaction(startup) {=
    name = self.lf_reactor_full_name()
    run_dir = run_directory(program_name(name), lf.time.start(), lf.run_id(), "runs")
    with open(os.path.join(run_dir, name), "w") as f:
      f.write(lf.run_id())
  =}
}

main reactor {
  a = new Writer()
  b = new Writer()
}
"""


@pytest.mark.parametrize("backend", ["processes", "threads"])
def test_reactors_on_two_workers_agree_and_runs_differ(tmp_path, backend):
    from conftest import build, run_program

    src = tmp_path / "TwoWriters.lf"
    src.write_text(TWO_WRITERS, encoding="utf-8")
    launcher = build(src, tmp_path / "out")
    for _ in range(2):
        result = run_program(launcher, "-w", "2", "--backend", backend)
        assert result.returncode == 0, result.stderr
    runs = tmp_path / "out" / "runs" / "TwoWriters"
    dirs = sorted(runs.iterdir())
    assert len(dirs) == 2, dirs
    ids = set()
    for d in dirs:
        files = {p.name: p.read_text() for p in d.iterdir() if not p.name.startswith(".")}
        assert sorted(files) == ["TwoWriters.a", "TwoWriters.b"]
        assert len(set(files.values())) == 1
        run_id = files["TwoWriters.a"]
        assert d.name.endswith("-" + run_id[:8]) and len(run_id) == 32
        ids.add(run_id)
    assert len(ids) == 2


def test_torch_write_failure_on_a_full_disk_names_enospc_and_path(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")

    def full(obj, f, *a, **k):
        raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")

    monkeypatch.setattr(torch, "save", full)
    monkeypatch.setattr(runlog, "_no_room", lambda path: True)
    path = str(tmp_path / "model.pt")
    with pytest.raises(OSError) as info:
        runlog.atomic_save({"w": 1}, path)
    assert info.value.errno == errno.ENOSPC and path in str(info.value)


def test_other_save_errors_pass_through(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")

    def denied(obj, f, *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(torch, "save", denied)
    with pytest.raises(PermissionError):
        runlog.atomic_save({"w": 1}, str(tmp_path / "model.pt"))
