"""Files of a run's records that cannot be written, as on a full disk: a snapshot, a recording,
a digest. The run stops with one line naming the file and the system's reason (exit status 1,
no traceback), leaves no temporary or part file, keeps its older snapshots, and what it wrote
before stays whole: a recording up to its last whole chunk, a digest up to its last whole
line. On one worker and on two (processes and threads).

A full disk is simulated without privileges: the program runs with ``RLIMIT_FSIZE`` lowered
(and ``SIGXFSZ`` ignored, as Python does anyway), so that a write past the limit fails with
``EFBIG`` ("File too large"); or the file is ``/dev/full``, as a user may do, whose writes fail
with ``ENOSPC`` ("No space left on device").
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, build, run_program

from reactors.records import recording_file

FILLER = ROOT / "tests" / "records_fixtures" / "Filler.lf"
VARIANTS = {
    "w1": ("-w", "1"),
    "w2-processes": ("-w", "2", "--backend", "processes"),
    "w2-threads": ("-w", "2", "--backend", "threads"),
}
TOO_LARGE = os.strerror(27)  # EFBIG
FULL = os.strerror(28)  # ENOSPC


@pytest.fixture(scope="module")
def filler(tmp_path_factory) -> Path:
    return build(FILLER, tmp_path_factory.mktemp("filler"))


def run_limited(launcher: Path, limit: int, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``launcher`` in ``cwd`` with files limited to ``limit`` bytes (and the temporary
    folder ``cwd/tmp``)."""

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [str(launcher), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=private_tmp(cwd),
        preexec_fn=limited,
    )


def private_tmp(cwd: Path) -> dict[str, str]:
    """The environment of a run whose temporary folder is ``cwd/tmp`` (what it leaves there
    is its own)."""
    (cwd / "tmp").mkdir(exist_ok=True)
    return dict(os.environ, PYTHONUNBUFFERED="1", TMPDIR=str(cwd / "tmp"))


def run_full(launcher: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``launcher`` in ``cwd`` (its temporary folder ``cwd/tmp``)."""
    return subprocess.run(
        [str(launcher), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=private_tmp(cwd),
    )


def one_line(r: subprocess.CompletedProcess) -> str:
    """The one line the failed run said (exit status 1, nothing else on stderr)."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1, r.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    """Temporary and part files in ``folder`` (and its runs' temporary folder, ``tmp``)."""
    found = [
        str(p)
        for p in folder.rglob("*")
        if re.search(r"\.(part|tmp)\w*$|\.tmp\d*$|\.w\d+$", p.name) or p.parent.name == "tmp"
    ]
    return found + [n for n in os.listdir("/dev") if n.startswith("full.")]


def stdout_prefix(r: subprocess.CompletedProcess, reference: list[str]) -> list[str]:
    """The printed lines of a failed run, which must begin the reference run's."""
    lines = r.stdout.splitlines()
    assert lines == reference[: len(lines)], r.stdout[-2000:]
    return lines


@pytest.fixture(scope="module")
def reference(filler) -> list[str]:
    r = run_program(filler, "--count", "20000")
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


# --------------------------------------------------------------------------- snapshots

#: Snapshots every 400 tags; from tag 1000 each counter holds 60,000 bytes: the snapshots at
#: 400 and 800 are small, that at 1200 is over 100,000 bytes whole, each worker's part not.
SNAPSHOTS = ("--checkpoint-every-tags", "400", "--grow_at", "1000")


@pytest.mark.parametrize(
    "variant, ballast",
    [
        ("w1", "60000"),
        ("w2-processes", "60000"),  # the parts are written, worker 0 cannot join them
        ("w2-threads", "60000"),
        ("w2-processes", "150000"),  # no worker can write its part
        ("w2-threads", "150000"),
    ],
)
def test_a_snapshot_that_cannot_be_written_stops_the_run(
    filler, reference, tmp_path, variant, ballast
):
    ck = tmp_path / "ck"
    args = (*SNAPSHOTS, "--ballast", ballast, "--checkpoint-dir", str(ck), *VARIANTS[variant])
    r = run_limited(filler, 100_000, tmp_path, *args)
    line = one_line(r)
    m = re.fullmatch(r"ERROR: cannot write the snapshot (\S+): (.+)", line)
    assert m and m.group(2) == TOO_LARGE, line
    assert Path(m.group(1)).parent == ck and ".000000001200." in m.group(1), line
    kept = sorted(p.name for p in ck.glob("*.lfsnap"))
    assert [n.split(".")[-2] for n in kept] == ["000000000400", "000000000800"], kept
    assert not leftovers(tmp_path)
    assert len(stdout_prefix(r, reference)) >= 11  # up to the tag of the snapshot, 1200


# --------------------------------------------------------------------------- recordings

#: A recording checking every tag of 20,000 grows to ~1 MB (several chunks); ~120 KB on
#: one worker, ~240 KB on two fit under the limit.
RECORD_LIMIT = 400_000


def whole_chunks(path: Path) -> int:
    """The chunks of a recording file, which must end where its last whole chunk does."""
    data = path.read_bytes()
    assert data.startswith(recording_file.MAGIC)
    at = data.index(b"\n", len(recording_file.MAGIC)) + 1 + recording_file.MAC_SIZE
    chunks = 0
    while at < len(data):
        (n,) = recording_file.LENGTH.unpack_from(data, at)
        at += recording_file.LENGTH.size + n + recording_file.MAC_SIZE
        chunks += 1
    assert at == len(data), f"{path}: a torn chunk at its end"
    return chunks


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_recording_that_cannot_be_written_stops_the_run(filler, reference, tmp_path, variant):
    tape = tmp_path / "run.lfrec"
    args = ("--count", "20000", "--record", str(tape), "--record-every-tag", *VARIANTS[variant])
    r = run_limited(filler, RECORD_LIMIT, tmp_path, *args)
    assert one_line(r) == f"ERROR: --record: cannot write {tape}: {TOO_LARGE}"
    stdout_prefix(r, reference)
    files = recording_file.parts_of(str(tape))  # one worker's file, or the parts it could not join
    assert files and sum(whole_chunks(Path(f)) for f in files) >= len(files)
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]
    replayed = run_program(filler, "--replay", str(tape), *VARIANTS[variant])
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    *lines, total = replayed.stdout.splitlines()  # the shutdown line at the last tag recorded
    assert len(lines) >= 10 and lines == reference[: len(lines)] and total.startswith("total ")
    assert "Replay matched the recording" in replayed.stderr


def test_a_recording_into_a_full_device(filler, tmp_path):
    for variant in VARIANTS.values():
        r = run_full(filler, tmp_path, "--record", "/dev/full", *variant)
        assert one_line(r) == f"ERROR: --record: cannot write /dev/full: {FULL}", variant
        assert not leftovers(tmp_path), variant


# --------------------------------------------------------------------------- digests


@pytest.mark.parametrize(
    "variant, limit",
    [
        ("w1", 200_000),
        ("w2-processes", 300_000),  # each worker's part is written, the whole is not
        ("w2-threads", 300_000),
        ("w2-processes", 150_000),  # no worker's part is written whole
        ("w2-threads", 150_000),
    ],
)
def test_a_digest_that_cannot_be_written_keeps_its_whole_lines(filler, tmp_path, variant, limit):
    full = tmp_path / "full.digest"
    assert run_program(filler, "--digest", str(full)).returncode == 0
    reference = full.read_text().splitlines(keepends=True)
    assert len("".join(reference)) > 400_000  # ~200 bytes per tag
    digest = tmp_path / "cut.digest"
    r = run_limited(filler, limit, tmp_path, "--digest", str(digest), *VARIANTS[variant])
    assert one_line(r) == f"ERROR: --digest: cannot write {digest}: {TOO_LARGE}"
    text = digest.read_text()
    assert text.endswith("\n") and len(text) <= limit
    lines = text.splitlines(keepends=True)
    assert 100 < len(lines) and lines == reference[: len(lines)]
    assert not leftovers(tmp_path)


def test_a_digest_into_a_full_device(filler, tmp_path):
    for variant in VARIANTS.values():
        r = run_full(filler, tmp_path, "--digest", "/dev/full", *variant)
        assert one_line(r) == f"ERROR: --digest: cannot write /dev/full: {FULL}", variant
        assert not leftovers(tmp_path), variant
