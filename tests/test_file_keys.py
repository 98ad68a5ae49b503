"""Snapshots and recordings carry an HMAC-SHA256 under the user's key (reactors.records.user_key),
and ``--resume``/``--replay`` check it before anything in the file is unpickled: a file of another
key (another user's), edited, or of an older version without an HMAC is refused with one line
saying which file, why and how to trust it (status 1); ``--trust`` loads it after saying so.

Every program the tests run uses the session's key (``LF_RL_KEY``, tests/conftest.py); a test
that needs another user points ``LF_RL_KEY`` at another file.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, build, run_program

from reactors.records import recording_file, snapshot_file, user_key
from reactors.records.snapshot import SnapshotError

FILLER = ROOT / "tests" / "records_fixtures" / "Filler.lf"
TWO = ("-w", "2", "--backend", "processes")


@pytest.fixture(scope="module")
def filler(tmp_path_factory) -> Path:
    return build(FILLER, tmp_path_factory.mktemp("filler"))


def run_as(launcher: Path, key: Path | None, *args: str) -> subprocess.CompletedProcess:
    """Run ``launcher`` as the user whose key is ``key`` (None: the session's)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if key is not None:
        env["LF_RL_KEY"] = str(key)
    return subprocess.run(
        [str(launcher), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=launcher.parent.parent,
    )


def refusal(r: subprocess.CompletedProcess, path: Path, why: str) -> str:
    """The one line of a refused file: status 1, nothing run, the file, why, how to trust."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and not r.stdout, r.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert str(path) in lines[0] and why in lines[0] and "--trust" in lines[0], lines[0]
    return lines[0]


def evil_pickle(marker: Path) -> bytes:
    """A pickle that creates ``marker`` when it is loaded (``open(marker, "w")``)."""
    return b"cbuiltins\nopen\n(V" + str(marker).encode() + b"\nVw\ntR."


# --------------------------------------------------------------------------- the key


def test_the_key_is_made_once_private_and_outside_run_directories(tmp_path):
    """With no ``LF_RL_KEY``, the key is ``$XDG_CONFIG_HOME/lf-rl/key``: 32 bytes, mode 0600 in
    a folder of mode 0700; six first uses at once agree on one key."""
    env = {k: v for k, v in os.environ.items() if k != user_key.ENV}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    code = "from reactors.records import user_key; print(user_key.user_key().hex())"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    path = tmp_path / "config" / "lf-rl" / "key"
    assert keys == {path.read_bytes().hex()} and len(path.read_bytes()) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["key"]  # no temporary file left


@pytest.mark.parametrize("what", ["a folder", "a short file"])
def test_a_key_that_cannot_be_used_stops_the_run_at_once(filler, tmp_path, what):
    key = tmp_path / "key"
    if what == "a folder":
        key.mkdir()
    else:
        key.write_bytes(b"short")
    for args in (("--record", str(tmp_path / "r.lfrec")), ("--checkpoint-every-tags", "9")):
        r = run_as(filler, key, *args, *TWO)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 1 and not r.stdout and len(lines) == 1, r.stderr
        assert str(key) in lines[0] and user_key.ENV in lines[0], lines[0]
    assert not list(tmp_path.glob("r.lfrec*"))


def test_help_says_how_files_are_trusted(filler):
    r = run_program(filler, "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "--trust" in text and "HMAC" in text and user_key.ENV in text
    for option in ("--resume", "--replay"):
        line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith(option))
        more = r.stdout.split(line, 1)[1].split("\n  --", 1)[0]
        assert "key" in line + more, option


# --------------------------------------------------------------------------- snapshots


@pytest.fixture(scope="module")
def snapshots(filler, tmp_path_factory) -> dict:
    """Snapshots of a run on two workers (the session's key), the digest of that run, and
    another user's key."""
    folder = tmp_path_factory.mktemp("snapshots")
    digest = folder / "ref.digest"
    args = ("--checkpoint-every-tags", "500", "--checkpoint-dir", str(folder / "ck"))
    r = run_program(filler, *args, "--digest", str(digest), *TWO)
    assert r.returncode == 0, r.stderr
    files = sorted((folder / "ck").glob("*.lfsnap"))
    assert len(files) == 3
    return {
        "files": files,
        "digest": digest.read_text(),
        "stdout": r.stdout,
        "other": folder / "other-key",
    }


def resumed(
    filler, snapshot: Path, key: Path | None, folder: Path, *args: str
) -> subprocess.CompletedProcess:
    """Resume from a copy of ``snapshot`` in ``folder`` (a resumed run writes its own
    snapshots beside the one it resumed from)."""
    copy = folder / "resumed" / snapshot.name
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes(snapshot.read_bytes())
    return run_as(filler, key, "--resume", str(copy), *args)


def test_a_snapshot_of_another_key_is_refused_unless_trusted(filler, snapshots, tmp_path):
    snapshot, other = snapshots["files"][0], snapshots["other"]
    copy = tmp_path / "resumed" / snapshot.name
    line = refusal(resumed(filler, snapshot, other, tmp_path), copy, "another key")
    assert "cannot resume from" in line
    digest = tmp_path / "d"
    r = resumed(filler, snapshot, other, tmp_path, "--trust", "--digest", str(digest), *TWO)
    assert r.returncode == 0, r.stderr
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("WARNING: --trust: ")]
    assert len(said) == 1 and str(copy) in said[0], r.stderr
    tag = snapshot_file.read_file(str(snapshot), parts=False)[0]["elapsed"]
    after = [ln for ln in snapshots["digest"].splitlines(True) if int(ln.split()[0]) > tag]
    assert digest.read_text() == "".join(after)


@pytest.mark.parametrize("where", ["manifest", "state"])
def test_an_edited_snapshot_is_refused(filler, snapshots, tmp_path, where):
    data = bytearray(snapshots["files"][1].read_bytes())
    if where == "manifest":  # a main-reactor argument (target code runs when built)
        head = data.index(b"\n", data.index(b"\n") + 1)
        manifest = json.loads(data[data.index(b"\n") + 1 : head])
        manifest["arguments"] = [["count", "{= __import__('os').getpid() =}"]]
        data[data.index(b"\n") + 1 : head] = json.dumps(manifest).encode()
    else:
        data[len(data) // 2] ^= 1
    edited = tmp_path / snapshots["files"][1].name
    edited.write_bytes(bytes(data))
    for variant in (("-w", "1"), TWO):
        r = resumed(filler, edited, None, tmp_path, *variant)
        refusal(r, tmp_path / "resumed" / edited.name, "changed since")


def test_a_snapshot_is_not_unpickled_before_it_is_authenticated(filler, snapshots, tmp_path):
    """A forged snapshot whose state would create a file when unpickled: refused, and the
    file is not created; with --trust it is (what --trust means)."""
    genuine = snapshots["files"][0].read_bytes()
    head = genuine[: genuine.index(b"\n", genuine.index(b"\n") + 1) + 1]
    marker = tmp_path / "unpickled"
    blob = evil_pickle(marker)
    forged = tmp_path / snapshots["files"][0].name
    forged.write_bytes(head + len(blob).to_bytes(8, "big") + blob + os.urandom(32))
    copy = tmp_path / "resumed" / forged.name
    refusal(resumed(filler, forged, None, tmp_path), copy, "another key")
    assert not marker.exists()
    r = resumed(filler, forged, None, tmp_path, "--trust")
    assert marker.exists() and r.returncode == 1 and "Traceback" not in r.stderr


def test_a_snapshot_of_an_older_version_is_refused_unless_trusted(filler, snapshots, tmp_path):
    """A snapshot file of format 1 (no HMAC): refused with what it is; trusted, it resumes."""
    manifest, parts = snapshot_file.read_file(str(snapshots["files"][1]))
    manifest["format"] = 1
    old = tmp_path / snapshots["files"][1].name
    with open(old, "wb") as f:
        f.write(b"LFSNAPSHOT 1\n" + json.dumps(manifest).encode() + b"\n")
        for blob in parts:
            f.write(len(blob).to_bytes(8, "big") + blob)
    refusal(resumed(filler, old, None, tmp_path), tmp_path / "resumed" / old.name, "older version")
    r = resumed(filler, old, None, tmp_path, "--trust")
    assert r.returncode == 0, r.stderr
    ref = snapshots["stdout"].splitlines(keepends=True)  # "<count> <sum>" every 100, "total"
    after = [ln for ln in ref if ln.startswith("total") or int(ln.split()[0]) > manifest["tags"]]
    assert len(after) > 1 and r.stdout == "".join(after)


def test_a_worker_part_is_checked_before_it_is_joined(tmp_path):
    """The part a worker writes for worker 0 to join carries its own HMAC, bound to its
    name: an edited part, or another part put in its place, is refused."""
    first, second = (
        tmp_path / ".P.run.000000000011.w0.part",
        tmp_path / ".P.run.000000000011.w1.part",
    )
    snapshot_file.write_part(str(first), b"state of worker 0", "P.000000000011.lfsnap")
    snapshot_file.write_part(str(second), b"state of worker 1", "P.000000000011.lfsnap")
    assert snapshot_file.read_part(str(first)) == b"state of worker 0"
    second.write_bytes(first.read_bytes())
    with pytest.raises(SnapshotError, match="not authenticated"):
        snapshot_file.read_part(str(second))


# --------------------------------------------------------------------------- recordings


@pytest.fixture(scope="module")
def tape(filler, tmp_path_factory) -> dict:
    """A recording (the session's key) of a run on two workers, and its stdout."""
    folder = tmp_path_factory.mktemp("tape")
    path = folder / "run.lfrec"
    r = run_program(filler, "--record", str(path), "--record-every-tag", *TWO)
    assert r.returncode == 0, r.stderr
    return {"path": path, "stdout": r.stdout, "other": folder / "other-key"}


def test_a_recording_of_another_key_is_refused_unless_trusted(filler, tape):
    line = refusal(
        run_as(filler, tape["other"], "--replay", str(tape["path"])), tape["path"], "another key"
    )
    assert line.startswith("ERROR: --replay: ")
    r = run_as(filler, tape["other"], "--replay", str(tape["path"]), "--trust", *TWO)
    assert r.returncode == 0 and r.stdout == tape["stdout"], r.stderr
    assert sum(ln.startswith("WARNING: --trust: ") for ln in r.stderr.splitlines()) == 1


def test_an_edited_recording_is_refused(filler, tape, tmp_path):
    data = bytearray(tape["path"].read_bytes())
    data[-200] ^= 1  # in its last chunk
    edited = tmp_path / "edited.lfrec"
    edited.write_bytes(bytes(data))
    refusal(run_program(filler, "--replay", str(edited)), edited, "changed since")


def test_a_recording_is_not_unpickled_before_it_is_authenticated(filler, tape, tmp_path):
    genuine = tape["path"].read_bytes()
    head = genuine[: genuine.index(b"\n", len(recording_file.MAGIC)) + 1 + recording_file.MAC_SIZE]
    marker = tmp_path / "unpickled"
    blob = evil_pickle(marker)
    forged = tmp_path / "forged.lfrec"
    forged.write_bytes(head + recording_file.LENGTH.pack(len(blob)) + blob + os.urandom(32))
    refusal(run_program(filler, "--replay", str(forged)), forged, "changed since")
    assert not marker.exists()


def test_a_recording_of_an_older_version_is_refused_unless_trusted(filler, tape, tmp_path):
    """A recording of format 2 (its chunks without HMACs): refused; trusted, it replays."""
    data = tape["path"].read_bytes()
    at = data.index(b"\n", len(recording_file.MAGIC)) + 1
    chunks = [b"LFRECORDING 2\n" + data[len(recording_file.MAGIC) : at]]
    at += recording_file.MAC_SIZE
    while at < len(data):
        (n,) = recording_file.LENGTH.unpack_from(data, at)
        chunks.append(data[at : at + recording_file.LENGTH.size + n])
        at += recording_file.LENGTH.size + n + recording_file.MAC_SIZE
    old = tmp_path / "old.lfrec"
    old.write_bytes(b"".join(chunks))
    refusal(run_program(filler, "--replay", str(old)), old, "older version")
    r = run_program(filler, "--replay", str(old), "--trust")
    assert r.returncode == 0 and r.stdout == tape["stdout"], r.stderr


def test_joining_a_recording_checks_each_part(tape, tmp_path):
    """The parts of a recording on several workers are checked as they are joined: an edited
    part is not joined (it would be authenticated by the joined file's HMAC); the parts stay."""
    base = tmp_path / "joined.lfrec"
    for k in (0, 1):
        (tmp_path / f"joined.lfrec.w{k}").write_bytes(tape["path"].read_bytes())
    recording_file.join(str(base), 2)
    assert recording_file.load(str(base)).end is not None
    for k in (0, 1):
        (tmp_path / f"again.lfrec.w{k}").write_bytes(tape["path"].read_bytes())
    part = tmp_path / "again.lfrec.w1"
    data = bytearray(part.read_bytes())
    data[-200] ^= 1
    part.write_bytes(bytes(data))
    with pytest.raises(recording_file.ReplayError, match=re.escape(str(part))):
        recording_file.join(str(tmp_path / "again.lfrec"), 2)
    assert not (tmp_path / "again.lfrec").exists() and part.exists()
