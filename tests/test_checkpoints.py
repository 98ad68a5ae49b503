"""Checkpoints and resume (reactors.records.checkpoint, reactors.records.snapshot): a run resumed
from any snapshot, on any worker count and backend, prints and computes from the snapshot's tag on
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

from reactors.records import snapshot_file, snapshot_runs

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


def run_of(ref: Reference, key: str) -> str:
    """The run id in the manifest of the first snapshot of ``ref.snapshots[key]``."""
    with open(ref.snapshots[key][0], "rb") as f:
        f.readline()
        return json.loads(f.readline())["run_id"]


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
    counts = [int(p.name.split(".")[-2]) for p in by_tags]
    assert counts == [11 * (i + 1) for i in range(len(counts))]
    by_time = [tag_of(p)[0] for p in resumable.snapshots["by-time-w2"]]
    period = 170_000_000
    assert [t // period for t in by_time] == list(range(1, len(by_time) + 1))
    with open(by_tags[0], "rb") as f:
        assert f.readline() == snapshot_file.MAGIC
        manifest = json.loads(f.readline())
    assert manifest["program"] == "Resumable" and manifest["tags"] == 11
    assert by_tags[0].name == f"Resumable.{manifest['run_id'][:8]}.000000000011.lfsnap"
    assert manifest["policy"] == {"every_ns": None, "every_tags": 11, "keep": 1000}
    for taken in ("by-tags-w1", "by-time-w2"):  # both reached their stop tag
        folder, run = resumable.snapshots[taken][0].parent, run_of(resumable, taken)
        assert snapshot_runs.finished(str(folder), "Resumable", run)["tag"] == [2_000_000_000, 0]
    assert "Resumable.modal" in manifest["reactors"] and manifest["versions"]["python"]
    assert not [n for n in os.listdir(by_tags[0].parent) if n.endswith((".part", ".tmp"))]


def test_a_finished_run_resumes_only_from_a_file_named(resumable, tmp_path):
    """The directory of a run that finished has nothing to resume (one line, exit status 1);
    its newest snapshot named as a file runs it again from there, as it ran."""
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
    r = run_program(resumable.launcher, "--resume", str(folder))
    assert r.returncode == 1 and not r.stdout and len(r.stderr.splitlines()) == 1, r.stderr
    assert "of Resumable finished" in r.stderr and f"--resume {kept[-1]}" in r.stderr
    tag = tag_of(kept[-1])
    digest, stdout = digest_of(resumable.launcher, "--resume", str(kept[-1]))
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


# --------------------------------------------------------------------------- the snapshots of a run

COUNTER = FIXTURES / "Counter.lf"


@pytest.fixture(scope="module")
def counter(tmp_path_factory) -> Path:
    return build(COUNTER, tmp_path_factory.mktemp("counter"))


def counter_lines(run: str, after: Tag = (-1, 0), last_ms: int = 1000) -> list[str]:
    """What Counter prints after tag ``after`` until its timeout ``last_ms``: at 10*i ms,
    count i + 1, and the first 8 digits of its run id ``run``."""
    lines = [f"{10 * i:5d}ms/0 count {i + 1} run {run}" for i in range(last_ms // 10 + 1)]
    return [ln for ln, i in zip(lines, range(len(lines))) if (i * 10_000_000, 0) > after]


def killed_counter(launcher: Path, folder: Path, *args: str) -> subprocess.Popen:
    """Start Counter in real time, snapshots every 5 tags into ``folder``; SIGKILL it once its
    first snapshot is there. Returns the dead process."""
    before = set(folder.glob("*.lfsnap"))
    proc = subprocess.Popen(
        [str(launcher), "-f", "false", "--checkpoint-every-tags", "5"]
        + ["--checkpoint-dir", str(folder), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=launcher.parent.parent,
    )
    deadline = time.monotonic() + 30
    while not set(folder.glob("*.lfsnap")) - before and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it was killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return proc


def snapshots_by_run(folder: Path) -> dict[str, list[int]]:
    """The tag counts of the snapshots in ``folder`` by run (the 8 digits of its name)."""
    out: dict[str, list[int]] = {}
    for p in sorted(folder.glob("*.lfsnap")):
        program, run, tags, _ = p.name.split(".")
        assert program == "Counter"
        out.setdefault(run, []).append(int(tags))
    return out


def test_runs_in_one_folder_keep_their_own_snapshots(counter, tmp_path):
    folder = tmp_path / "snaps"
    args = ("--checkpoint-every-tags", "10", "--checkpoint-keep", "2")
    r = run_program(counter, *args, "--checkpoint-dir", str(folder))
    assert r.returncode == 0, r.stderr
    finished = r.stdout.split()[-1]  # the run id's 8 digits
    assert r.stdout.splitlines() == counter_lines(finished)
    killed_counter(counter, folder, "--checkpoint-keep", "2")
    runs = snapshots_by_run(folder)
    assert finished in runs and len(runs) == 2, runs
    assert runs[finished] == [90, 100], "the second run pruned or overwrote the first's"
    killed = next(run for run in runs if run != finished)
    for p in folder.glob("*.lfsnap"):
        with open(p, "rb") as f:
            f.readline()
            assert json.loads(f.readline())["run_id"].startswith(p.name.split(".")[1])
    r = run_program(counter, "--resume", str(folder))
    assert r.returncode == 1 and not r.stdout
    assert f"{folder} holds the snapshots of 2 runs of Counter" in r.stderr
    listed = {ln.split()[1]: ln for ln in r.stderr.splitlines() if ln.startswith("  run ")}
    assert sorted(listed) == sorted(runs)
    assert " finished " in listed[finished] and "not finished" in listed[killed]
    newest = folder / f"Counter.{killed}.{max(runs[killed]):012d}.lfsnap"
    assert f"--resume {newest}" in listed[killed]
    tag = tag_of(newest)
    r = run_program(counter, "--resume", str(newest))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == counter_lines(killed, tag)


def test_two_resumes_of_a_killed_run_at_once(counter, tmp_path):
    folder = tmp_path / "snaps"
    killed_counter(counter, folder)
    (run,) = snapshots_by_run(folder)
    tag = tag_of(Path(snapshot_file.newest(str(folder))))
    resume = [str(counter), "--resume", str(folder), "-f", "false", "-o", "2", "sec"]
    env = dict(os.environ, COUNTER_SAYS_LOADED="1")  # the refused one says it before loading
    both = [
        subprocess.Popen(resume, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    out = [p.communicate(timeout=60) for p in both]
    status = [p.returncode for p in both]
    assert sorted(status) == [0, 1], (status, out)
    winner, loser = (0, 1) if status[0] == 0 else (1, 0)
    stdout, stderr = out[loser]
    assert not stdout and len(stderr.splitlines()) == 1, stderr
    assert f"run {run}" in stderr and f"process {both[winner].pid}" in stderr, stderr
    assert out[winner][0].splitlines() == counter_lines(run, tag, 2000), "not the run it continues"
    taken = snapshots_by_run(folder)
    assert list(taken) == [run] and max(taken[run]) == 200, "the resumed run took no snapshots"
    r = run_program(counter, "--resume", str(folder))
    assert r.returncode == 1 and not r.stdout and len(r.stderr.splitlines()) == 1, r.stderr
    assert f"run {run} of Counter finished" in r.stderr


def stamped(stdout: str) -> list[str]:
    """The lines of ``stdout`` but the learner's ``checkpoint: <model file>`` at shutdown."""
    return [ln for ln in stdout.splitlines() if not ln.startswith("checkpoint: ")]


def test_resume_hook_sets_up_torch_as_the_fresh_run_did(tmp_path):
    launcher = build(FIXTURES / "TorchProbe.lf", tmp_path)
    folder = tmp_path / "snaps"
    r = run_program(launcher, "--checkpoint-every-tags", "5", "--checkpoint-dir", str(folder))
    assert r.returncode == 0, r.stderr
    fresh = stamped(r.stdout)
    assert fresh[0].endswith("policy (1, True, False) learner (1, True, False)"), fresh[0]
    (snapshot,) = sorted(folder.glob("*.lfsnap"))[:1]
    tag = tag_of(snapshot)
    for variant in VARIANTS.values():
        r = run_program(launcher, "--resume", str(snapshot), *variant)
        assert r.returncode == 0, r.stderr
        assert stamped(r.stdout) == stdout_after(fresh, tag), variant


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_a_worker_that_owns_no_reactor_writes_its_part_of_the_programs_snapshots(tmp_path, backend):
    launcher = build(FIXTURES / "OwnPolicy.lf", tmp_path / "out")
    one = run_program(launcher, "--folder", str(tmp_path / "one"), "-w", "1")
    assert one.returncode == 0, one.stderr[-3000:]
    # a process per worker also on fewer than three cores, so that one worker owns no reactor
    args = ("--folder", str(tmp_path / "many"), "-w", "3", "--backend", backend, "--oversubscribe")
    many = run_program(launcher, *args)
    assert many.returncode == 0, many.stderr[-3000:]
    assert many.stdout == one.stdout
    snaps = sorted((tmp_path / "many").glob("*.lfsnap"))
    assert len(snaps) >= 3, sorted(os.listdir(tmp_path / "many"))
    assert not list((tmp_path / "many").glob("*.part"))
    middle = snaps[len(snaps) // 2]
    resumed = run_program(launcher, "--resume", str(middle), "-w", "1")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.splitlines() == stdout_after(one.stdout.splitlines(), tag_of(middle))
