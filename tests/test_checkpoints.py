"""Checkpoints and resume (reactors.checkpoint, reactors.snapshot): a run resumed from any
snapshot, on any worker count and backend, prints and computes from the snapshot's tag on
exactly what the uninterrupted run did (digest lines and stdout compared exactly).

The programs are in tests/checkpoint_fixtures/: Resumable (timers, ``after`` delays, a
logical action with values and min_spacing, modes entered by reset and by history, a numpy
generator as state, microsteps), Hooked (a reactor saving itself through
``__getstate__``/``__setstate__``) and Unsavable (a lock as state).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT, build, run_program
from hypothesis import given, settings
from hypothesis import strategies as st

from reactors import snapshot_file

FIXTURES = ROOT / "tests" / "checkpoint_fixtures"
ONE = ("-w", "1")
PROCESSES = ("-w", "2", "--backend", "processes")
THREADS = ("-w", "2", "--backend", "threads")
VARIANTS = {"w1": ONE, "w2-processes": PROCESSES, "w2-threads": THREADS}

Tag = tuple[int, int]


class Reference:
    """A built program, its uninterrupted run (digest lines, stdout lines) and snapshot
    directories taken on one and on two workers."""

    def __init__(self, launcher: Path, digest: list[str], stdout: list[str]):
        self.launcher, self.digest, self.stdout = launcher, digest, stdout
        self.snapshots: dict[str, list[Path]] = {}

    def take(self, key: str, *args: str, least: int = 4) -> None:
        """Run with checkpoints (``args``: the policy and workers) into a directory ``key``;
        the run itself must print what the uninterrupted run printed."""
        folder = self.launcher.parent.parent / key
        r = run_program(
            self.launcher, "--checkpoint-dir", str(folder), "--checkpoint-keep", "1000", *args
        )
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.splitlines() == self.stdout, "checkpoints changed the output"
        self.snapshots[key] = sorted(folder.glob("*.lfsnap"))
        assert len(self.snapshots[key]) >= least, f"{key}: too few snapshots"


def digest_of(launcher: Path, *args: str) -> tuple[list[str], list[str]]:
    """Run with ``--digest``; the digest lines and the stdout lines (exit status 0)."""
    path = launcher.parent.parent / "run.digest"
    if path.exists():
        path.unlink()
    r = run_program(launcher, "--digest", str(path), *args)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stderr[-3000:]}"
    return path.read_text().splitlines(), r.stdout.splitlines()


def tag_of(snapshot: Path) -> Tag:
    """The tag of a snapshot file, from its manifest (elapsed ns, microstep)."""
    with open(snapshot, "rb") as f:
        f.readline()
        manifest = json.loads(f.readline())
    return manifest["elapsed"], manifest["micro"]


def digest_after(lines: list[str], tag: Tag) -> list[str]:
    """The digest lines of the tags after ``tag``."""
    return [ln for ln in lines if (int(ln.split()[0]), int(ln.split()[1])) > tag]


_STAMP = re.compile(r"^\s*(\d+)ms/(\d+) ")


def stdout_after(lines: list[str], tag: Tag) -> list[str]:
    """The printed lines (each starting with ``<ms>ms/<microstep>``) of the tags after ``tag``."""
    out = []
    for ln in lines:
        m = _STAMP.match(ln)
        assert m, f"unstamped line {ln!r}"
        if (int(m.group(1)) * 1_000_000, int(m.group(2))) > tag:
            out.append(ln)
    return out


def assert_resumes(ref: Reference, snapshot: Path, variant: tuple[str, ...]) -> None:
    """Resuming from ``snapshot`` on ``variant`` continues the reference run exactly."""
    tag = tag_of(snapshot)
    digest, stdout = digest_of(ref.launcher, "--resume", str(snapshot), *variant)
    where = f"{snapshot.name} (tag {tag}) resumed with {' '.join(variant)}"
    assert digest == digest_after(ref.digest, tag), f"{where}: digests differ"
    assert stdout == stdout_after(ref.stdout, tag), f"{where}: stdout differs"


# one xdist worker runs the whole module (make test: ``--dist loadgroup``), so that its
# module-scoped runs are made once
pytestmark = pytest.mark.xdist_group("checkpoints")


@pytest.fixture(scope="module")
def resumable(tmp_path_factory) -> Reference:
    out = tmp_path_factory.mktemp("resumable")
    launcher = build(FIXTURES / "Resumable.lf", out)
    ref = Reference(launcher, *digest_of(launcher, *ONE))
    assert len(ref.digest) > 100 and len(ref.stdout) > 50
    ref.take("by-tags-w1", "--checkpoint-every-tags", "11", *ONE)
    ref.take("by-time-w2", "--checkpoint-every", "170", "msec", *PROCESSES)
    return ref


@pytest.mark.parametrize(
    "taken, variant",
    [("by-tags-w1", "w2-processes"), ("by-time-w2", "w1"), ("by-time-w2", "w2-threads")],
)
def test_resume_continues_the_run(resumable, taken, variant):
    snaps = resumable.snapshots[taken]
    assert_resumes(resumable, snaps[len(snaps) // 2], VARIANTS[variant])


@settings(max_examples=4, derandomize=True, deadline=None)
@given(data=st.data())
def test_resume_from_any_snapshot(resumable, data):
    taken = data.draw(st.sampled_from(sorted(resumable.snapshots)), label="taken on")
    snaps = resumable.snapshots[taken]
    index = data.draw(st.integers(0, len(snaps) - 1), label="snapshot")
    variant = data.draw(st.sampled_from(sorted(VARIANTS)), label="resumed on")
    assert_resumes(resumable, snaps[index], VARIANTS[variant])


def test_snapshot_times_and_manifest(resumable):
    by_tags = resumable.snapshots["by-tags-w1"]
    counts = [int(p.name.split(".")[1]) for p in by_tags]
    assert counts == [11 * (i + 1) for i in range(len(counts))]
    by_time = [tag_of(p)[0] for p in resumable.snapshots["by-time-w2"]]
    period = 170_000_000
    assert [t // period for t in by_time] == list(range(1, len(by_time) + 1))
    with open(by_tags[0], "rb") as f:
        assert f.readline() == b"LFSNAPSHOT 1\n"
        manifest = json.loads(f.readline())
    assert manifest["program"] == "Resumable" and manifest["tags"] == 11
    assert "Resumable.modal" in manifest["reactors"] and manifest["versions"]["python"]
    assert not [n for n in os.listdir(by_tags[0].parent) if n.endswith((".part", ".tmp"))]


def test_resume_a_directory_takes_its_newest(resumable, tmp_path):
    folder = tmp_path / "few"
    r = run_program(
        resumable.launcher,
        "--checkpoint-every-tags",
        "20",
        "--checkpoint-keep",
        "2",
        "--checkpoint-dir",
        str(folder),
    )
    assert r.returncode == 0, r.stderr
    kept = sorted(folder.glob("*.lfsnap"))
    assert len(kept) == 2
    tag = tag_of(kept[-1])
    digest, stdout = digest_of(resumable.launcher, "--resume", str(folder))
    assert digest == digest_after(resumable.digest, tag)
    assert stdout == stdout_after(resumable.stdout, tag)


def test_reactor_hooks_save_what_they_choose(tmp_path):
    launcher = build(FIXTURES / "Hooked.lf", tmp_path)
    ref = Reference(launcher, *digest_of(launcher))
    ref.take("snaps", "--checkpoint-every-tags", "3")
    for snapshot in ref.snapshots["snaps"][1::3]:
        assert_resumes(ref, snapshot, ONE)


def test_unpicklable_state_is_named_at_start_up(tmp_path):
    launcher = build(FIXTURES / "Unsavable.lf", tmp_path)
    r = run_program(launcher, "--checkpoint-every", "1", "sec", "--checkpoint-dir", str(tmp_path))
    assert r.returncode == 1
    assert "reactor Unsavable.holder: state variable 'lock' cannot be saved" in r.stderr
    assert r.stdout.splitlines() == ["count 1"]  # stopped after the startup tag
    assert run_program(launcher).returncode == 0  # without checkpoints, nothing is checked


def test_snapshot_of_another_program_is_refused(resumable, tmp_path):
    launcher = build(FIXTURES / "Unsavable.lf", tmp_path)
    snapshot = resumable.snapshots["by-tags-w1"][0]
    r = run_program(launcher, "--resume", str(snapshot))
    assert r.returncode == 1 and not r.stdout
    assert "it is a snapshot of program 'Resumable', not of 'Unsavable'" in r.stderr


def test_snapshot_of_another_graph_is_refused(resumable, tmp_path):
    text = (FIXTURES / "Resumable.lf").read_text()
    changed = text.replace(
        "  printer = new Printer()\n", "  printer = new Printer()\n  extra = new Echo()\n"
    )
    assert changed != text
    (tmp_path / "Resumable.lf").write_text(changed)
    launcher = build(tmp_path / "Resumable.lf", tmp_path / "out")
    snapshot = resumable.snapshots["by-tags-w1"][0]
    r = run_program(launcher, "--resume", str(snapshot), *PROCESSES)
    assert r.returncode == 1 and not r.stdout
    assert (
        "graph differs" in r.stderr and "reactor Resumable.extra is not in the snapshot" in r.stderr
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--checkpoint-every-tags", "0"], "--checkpoint-every-tags expects a positive integer"),
        (["--checkpoint-every", "0"], "--checkpoint-every expects a positive duration"),
        (["--checkpoint-keep", "x"], "--checkpoint-keep expects a positive integer"),
        (["--resume"], "--resume expects a path"),
        (["--resume", "/nonexistent/snapshots"], "no snapshot /nonexistent/snapshots"),
    ],
)
def test_bad_checkpoint_options(resumable, args, message):
    r = run_program(resumable.launcher, *args)
    assert r.returncode == 1 and message in r.stderr


# --------------------------------------------------------------------------- programs of tests/lf

#: Self-checking programs of tests/lf with timers, ``after`` delays, logical actions with
#: values and modes; their snapshots are taken after every few tags on one worker.
LF_PROGRAMS = [
    "modal/ModalTimers.lf",
    "modal/ModalAfter.lf",
    "basic/ScheduleValue.lf",
    "multiport/PipelineAfter.lf",
]


@pytest.fixture(scope="module")
def lf_programs(tmp_path_factory) -> dict[str, Reference]:
    """Each program of :data:`LF_PROGRAMS`, built and run on first use."""
    built: dict[str, Reference] = {}
    root = tmp_path_factory.mktemp("lf")

    def get(name: str) -> Reference:
        if name not in built:
            launcher = build(ROOT / "tests" / "lf" / name, root / Path(name).stem)
            ref = Reference(launcher, *digest_of(launcher))
            tags = len({tuple(ln.split()[:2]) for ln in ref.digest})
            ref.take("snaps", "--checkpoint-every-tags", str(max(1, tags // 6)), least=2)
            built[name] = ref
        return built[name]

    return get  # type: ignore[return-value]


@settings(max_examples=4, derandomize=True, deadline=None)
@given(data=st.data())
def test_lf_programs_resume_from_any_snapshot(lf_programs, data):
    ref = lf_programs(data.draw(st.sampled_from(LF_PROGRAMS), label="program"))
    snaps = ref.snapshots["snaps"]
    snapshot = snaps[data.draw(st.integers(0, len(snaps) - 1), label="snapshot")]
    variant = VARIANTS[data.draw(st.sampled_from(sorted(VARIANTS)), label="resumed on")]
    tag = tag_of(snapshot)
    digest, _ = digest_of(ref.launcher, "--resume", str(snapshot), *variant)
    assert digest == digest_after(ref.digest, tag), f"{snapshot.name} on {variant}"


@settings(max_examples=2, derandomize=True, deadline=None)
@given(kill_ms=st.integers(0, 250), variant=st.sampled_from(sorted(VARIANTS)))
def test_killed_run_resumes_from_its_last_snapshot(resumable, tmp_path_factory, kill_ms, variant):
    """A run in real time killed (SIGKILL) ``kill_ms`` after its first snapshot resumes
    from the newest snapshot it left (written atomically: never a torn file) and computes what it would have."""
    folder = tmp_path_factory.mktemp("killed")
    timing = ("-f", "false", "-o", "500", "msec")
    end = (500_000_000, 0)  # the stop tag: the reference run's lines up to there
    ref_digest = [ln for ln in resumable.digest if digest_after([ln], end) == []]
    ref_stdout = [ln for ln in resumable.stdout if stdout_after([ln], end) == []]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    args = ["--checkpoint-every-tags", "3", "--checkpoint-dir", str(folder), *timing]
    proc = subprocess.Popen(
        [str(resumable.launcher), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=resumable.launcher.parent.parent,
    )
    deadline = time.monotonic() + 30
    while not list(folder.glob("*.lfsnap")) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(kill_ms / 1000)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    snapshot = Path(snapshot_file.newest(str(folder)))
    tag = tag_of(snapshot)
    digest, stdout = digest_of(
        resumable.launcher, "--resume", str(folder), *timing, *VARIANTS[variant]
    )
    assert digest == digest_after(ref_digest, tag)
    assert stdout == stdout_after(ref_stdout, tag)
