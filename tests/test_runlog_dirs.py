"""Run directories: named ``<program>__<env>__<seed>__<time>-<short id>``, one per run, even
for runs started in the same millisecond; the reactors of one run agree on theirs; a full
disk while saving a model names ENOSPC and the path."""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from reactors.core.context import new_run_id
from rl_algos import runlog

START_NS = 1_700_000_000_123_456_789  # every run below starts in the same millisecond
#: START_NS as the local time a run's name shows
STAMP = time.strftime("%Y%m%d-%H%M%S", time.localtime(1_700_000_000)) + "-123"
RUN_ID = "abcdef01" + "0" * 24


@pytest.mark.parametrize(
    ("parameters", "name"),
    [
        ({"env_id": "CartPole-v1", "seed": 3}, f"Prog__CartPole-v1__3__{STAMP}-abcdef01"),
        ({"env_id": "ALE/Pong-v5", "seed": 1}, f"Prog__ALE-Pong-v5__1__{STAMP}-abcdef01"),
        ({"env_id": "my.pkg:Grid-v0", "seed": 0}, f"Prog__my.pkg-Grid-v0__0__{STAMP}-abcdef01"),
        ({"env": "sort digits", "seed": 2}, f"Prog__sort-digits__2__{STAMP}-abcdef01"),
        ({"env_id": "", "seed": 5}, f"Prog__5__{STAMP}-abcdef01"),
        ({"env_id": "CartPole-v1"}, f"Prog__CartPole-v1__{STAMP}-abcdef01"),
        ({"members": 2}, f"Prog__{STAMP}-abcdef01"),
        (None, f"Prog__{STAMP}-abcdef01"),
    ],
)
def test_a_run_is_named_by_program_environment_seed_time_and_id(tmp_path, parameters, name):
    assert runlog.run_name("Prog", START_NS, RUN_ID, parameters) == name
    path = runlog.run_directory("Prog", START_NS, RUN_ID, str(tmp_path), parameters)
    assert path == os.path.join(str(tmp_path), "Prog", name)


def test_env_id_wins_over_env_and_a_long_one_is_cut():
    name = runlog.run_name("Prog", START_NS, RUN_ID, {"env_id": "a" * 100, "env": "b", "seed": 1})
    assert name == f"Prog__{'a' * 64}__1__{STAMP}-abcdef01"


def test_a_run_finds_its_directory_whatever_its_parameters_now(tmp_path):
    """A resumed run keeps the directory its run made, found by run id, not by name."""
    first = runlog.run_directory("Prog", START_NS, RUN_ID, str(tmp_path), {"seed": 1})
    again = runlog.run_directory("Prog", START_NS + 10**12, RUN_ID, str(tmp_path), {"seed": 2})
    assert again == first and os.listdir(tmp_path / "Prog") == [os.path.basename(first)]


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
    run_dir = run_directory(program_name(name), lf.time.start(), lf.run_id(), "runs",
                            lf.main_parameters())
    with open(os.path.join(run_dir, name), "w") as f:
      f.write(lf.run_id())
  =}
}

main reactor(env_id = "ALE/Pong-v5", seed = 1) {
  a = new Writer()
  b = new Writer()
}
"""
#: The name of a TwoWriters run directory (given --seed 7): the time and the short id vary.
TWO_WRITERS_RUN = re.compile(r"TwoWriters__ALE-Pong-v5__7__\d{8}-\d{6}-\d{3}-([0-9a-f]{8})")


@pytest.mark.parametrize("backend", ["processes", "threads"])
def test_reactors_on_two_workers_agree_and_runs_differ(tmp_path, backend):
    from conftest import build, run_program

    src = tmp_path / "TwoWriters.lf"
    src.write_text(TWO_WRITERS, encoding="utf-8")
    launcher = build(src, tmp_path / "out")
    for _ in range(2):
        result = run_program(launcher, "-w", "2", "--backend", backend, "--seed", "7")
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
        name = TWO_WRITERS_RUN.fullmatch(d.name)
        assert name is not None and name.group(1) == run_id[:8] and len(run_id) == 32, d.name
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
