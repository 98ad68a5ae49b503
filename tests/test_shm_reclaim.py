"""What a parallel run killed with its whole process group (SIGKILL: ``timeout -s KILL``,
``docker kill``, the OOM killer) leaves in ``/dev/shm`` is reclaimed by the next run of any
program, and nothing of a live run, of another pid space or named otherwise is ever touched
(other runs of other programs and users share ``/dev/shm``)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import build

from reactors.parallel import shm_owner

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fault_fixtures"

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self") or not os.path.isdir(shm_owner.SHM_DIR), reason="Linux only"
)


def _segments(pid: int) -> list[str]:
    return [n for n in os.listdir(shm_owner.SHM_DIR) if n.startswith(f"lf{pid}x")]


@pytest.fixture(scope="module")
def chatter(tmp_path_factory):
    return build(FIXTURES / "Chatter.lf", tmp_path_factory.mktemp("chatter"))


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    return build(FIXTURES / "StopElsewhere.lf", tmp_path_factory.mktemp("other"))


def _killed_run(chatter: Path) -> tuple[int, list[str]]:
    """A ``-w 2`` run of ``chatter`` SIGKILLed with its process group once it prints: its
    pid and the segments it had then (nothing of it can unlink them: they stay until a
    program starts, this test's next run or one of another test running meanwhile)."""
    p = subprocess.Popen(
        [str(chatter), "-w", "2", "-o", "60", "sec"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert p.stdout.readline()
        had = _segments(p.pid)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
    finally:
        p.kill()
        p.communicate()
    return p.pid, had  # its supervisor is dead (and reaped): the owner of them all


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_next_run_reclaims_what_a_killed_run_left(chatter, other, workers):
    pid, had = _killed_run(chatter)
    assert had
    r = subprocess.run([str(other), "-w", workers], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not _segments(pid), _segments(pid)


def test_the_next_run_removes_the_notes_a_killed_run_left(chatter, other, tmp_path):
    """The notes a run's processes share in the temporary folder (the folder of a snapshot's
    parts, reactors.core.context.scratch_file) are named after its supervisor, and go with
    its shared memory when a SIGKILL left them."""
    p = subprocess.Popen(
        [str(chatter), "-w", "2", "-o", "60", "sec", "--checkpoint-every-tags", "1"]
        + ["--checkpoint-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    tmp = tempfile.gettempdir()
    try:
        assert p.stdout.readline()
        deadline = time.monotonic() + 10
        while not (notes := [n for n in os.listdir(tmp) if n.startswith(f"lf{p.pid}x")]):
            assert time.monotonic() < deadline, "the run wrote no note of its snapshots' parts"
            time.sleep(0.01)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
    finally:
        p.kill()
        p.communicate()
    assert all(n.endswith("-snapshot-parts") for n in notes), notes
    r = subprocess.run([str(other)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not [n for n in notes if os.path.exists(os.path.join(tmp, n))]


def test_a_live_runs_segments_are_left_alone(chatter):
    p = subprocess.Popen(
        [str(chatter), "-w", "2", "-o", "60", "sec"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert p.stdout.readline()
        before = set(_segments(p.pid))
        shm_owner.reclaim()
        assert before and before <= set(_segments(p.pid))
    finally:
        p.kill()
        p.communicate()
    shm_owner.reclaim()  # it was killed: its segments go now
    assert not _segments(p.pid)


def _name(pid: int, start: int, space: str, what: str = "ctl") -> str:
    return f"lf{pid}x{start}t{space}0123abcd{what}"


def test_only_entries_of_dead_owners_of_this_space_are_removed(tmp_path):
    me = os.getpid()
    start = shm_owner.process_stat(me)[1]
    here = shm_owner.space()
    dead = subprocess.Popen(["sleep", "5"])
    dead_start = shm_owner.process_stat(dead.pid)[1]
    dead.kill()
    dead.wait()
    zombie = subprocess.Popen(["true"])
    zombie_start = shm_owner.process_stat(zombie.pid)[1]
    while shm_owner.process_stat(zombie.pid)[0] != "Z":
        time.sleep(0.01)
    other_space = f"{(int(here, 16) + 1) % (1 << 32):08x}"
    kept = [
        _name(me, start, here),  # a live owner
        _name(me, start, here, "c0s0g0"),
        _name(dead.pid, dead_start, other_space),  # another host or pid namespace
        f"lf{dead.pid}x0123abcd",  # named otherwise: not ours to judge
        f"lftest{dead.pid}x{dead_start}",
        "psm_0123abcd",
    ]
    removed = [
        _name(dead.pid, dead_start, here),  # no such process
        _name(dead.pid, dead_start, here, "n1c3s0g2"),  # a cluster node's copy
        _name(me, start + 1, here),  # this pid, but another process had it then
        _name(zombie.pid, zombie_start, here, "bell0"),  # a process that has ended
    ]
    for n in kept + removed:
        (tmp_path / n).write_bytes(b"")
    assert shm_owner.reclaim(str(tmp_path)) == len(removed)
    zombie.wait()
    assert sorted(os.listdir(tmp_path)) == sorted(kept)


def test_a_runs_prefix_names_its_owner():
    prefix = shm_owner.run_prefix()
    pid, start = os.getpid(), shm_owner.process_stat(os.getpid())[1]
    assert prefix.startswith(f"lf{pid}x{start}t{shm_owner.space()}")
    assert len(prefix) == len(f"lf{pid}x{start}t") + 16
    assert shm_owner.run_prefix() != prefix
