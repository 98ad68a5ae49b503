"""The snapshot file of a checkpoint (:mod:`reactors.records.checkpoint`): its name, its format,
reading and writing it, and whether it can resume a given program.

A file (format 2) is :data:`MAGIC`, one line of JSON (the manifest), then the parts, each an
8-byte big-endian length and a pickle, then the HMAC-SHA256 of all the bytes before it under
the user's key (:mod:`reactors.records.user_key`). It is written to a temporary name, fsynced and
renamed; a file that cannot be written (a full disk) leaves nothing behind and the older
snapshots as they were. Its name, ``<program>.<run>.<tags:012d>.lfsnap``, and the runs of a
directory: :mod:`reactors.records.snapshot_runs`.
Reading checks the HMAC before anything is used: a file of another key, changed, or of format
1 (:data:`OLD_MAGIC`, no HMAC) is refused unless trusted (``--trust``). Whether it can resume a
program is then decided from the manifest's hashes of the graph (:func:`fingerprint`,
:func:`graph_hash`) before anything is unpickled (:func:`usable`).

On several workers each writes its part (:func:`write_part`: the pickle and its HMAC, bound to
the part's file name) for worker 0 to check and join (:func:`read_part`); the parts a failed
run leaves are removed when it ends (:func:`note_parts`, :func:`discard_parts`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import json
import os
import platform
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..core.context import scratch_file
from ..core.errors import cannot_write
from ..model.json_form import encode
from ..model.program import Program
from .snapshot import SnapshotError
from .user_key import (
    CHANGED,
    OLDER,
    SIZE,
    KeyFileError,
    matches,
    new_mac,
    refusal,
    trusted,
    user_key,
)

#: The folder of a directory (an RL run's) where ``--resume DIR`` also looks for snapshots.
CHECKPOINTS = "checkpoints"
MAGIC = b"LFSNAPSHOT 2\n"
#: The first line of a file of format 1, which had no HMAC (read only when trusted).
OLD_MAGIC = b"LFSNAPSHOT 1\n"
SUFFIX = ".lfsnap"
FORMAT = 2
#: What an HMAC of a worker's part covers before its file name and its pickle.
PART_LABEL = b"LFSNAPSHOT part "
_VERSIONED = ("numpy", "torch", "gymnasium", "ale_py")


# --------------------------------------------------------------------------- the graph


def fingerprint(graph: Program) -> dict[str, str]:
    """A short hash of each reactor instance (by full name): its class, ports, timers,
    actions, modes and reactions, without source positions and placement."""
    reactions = {r.id: r for r in graph.reactions}
    out = {}
    for r in graph.reactors:
        spec = dataclasses.replace(
            r, id=0, parent=None, file="", line=0, worker=0, pin=None, label=None, reactions=()
        )
        rx = [
            dataclasses.replace(reactions[i], id=0, reactor=0, file="", line=0, label=None)
            for i in r.reactions
        ]
        text = json.dumps([encode(spec), [encode(x) for x in rx]], sort_keys=True)
        out[r.name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def graph_hash(graph: Program, reactors: dict[str, str]) -> str:
    """The hash of the whole graph: its reactors' hashes and its connections."""
    names = [r.name for r in graph.reactors]
    chans = [[names[c[0]], c[1], c[2], names[c[3]], c[4], c[5]] for c in graph.channels]
    text = json.dumps([sorted(reactors.items()), chans])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def versions() -> dict[str, str]:
    """The versions of Python and of the libraries whose objects a snapshot may hold (those
    loaded), for the manifest."""
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = str(getattr(mod, "__version__", "?"))
    return out


def compatibility(manifest: dict[str, Any], graph: Program) -> str | None:
    """Why a snapshot with ``manifest`` cannot resume ``graph`` (None: it can)."""
    if manifest.get("format") not in (1, FORMAT):
        return f"snapshot format {manifest.get('format')!r}, expected {FORMAT}"
    if manifest["program"] != graph.name:
        return f"it is a snapshot of program {manifest['program']!r}, not of {graph.name!r}"
    mine = fingerprint(graph)
    if manifest["graph"] == graph_hash(graph, mine):
        return None
    theirs: dict[str, str] = manifest["reactors"]
    diffs = [f"reactor {n} is not in the snapshot" for n in mine if n not in theirs]
    diffs += [f"reactor {n} is not in this program" for n in theirs if n not in mine]
    diffs += [f"reactor {n} differs" for n in mine if n in theirs and mine[n] != theirs[n]]
    if not diffs:
        diffs = ["the connections differ"]
    more = f" (and {len(diffs) - 5} more)" if len(diffs) > 5 else ""
    return "the program's graph differs from the snapshot's: " + "; ".join(diffs[:5]) + more


def usable(
    path: str, graph: Program, trust: bool = False, warn: Callable[[str], None] | None = None
) -> str:
    """The snapshot file that ``--resume path`` names (see :func:`newest`), after checking
    that it is authenticated (or ``trust``: see :func:`read_file`) and, from its manifest,
    that it can resume ``graph``.

    Raises:
        SnapshotError: it cannot (the message says why).
    """
    found = newest(path)
    manifest, _ = read_file(found, parts=False, trust=trust, warn=warn)
    why = compatibility(manifest, graph)
    if why is not None:
        raise SnapshotError(f"cannot resume from {found}: {why}")
    return found


# --------------------------------------------------------------------------- files


def write_file(path: str, manifest: dict[str, Any], parts: list[bytes]) -> None:
    """Write a snapshot file atomically, with its HMAC: temporary file, fsync, rename (and
    fsync the directory).

    Raises:
        SnapshotError: it cannot be written (the temporary file is removed) or the key
            cannot be read.
    """
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        mac = new_mac()
        with open(tmp, "wb") as f:
            for piece in _pieces(manifest, parts):
                mac.update(piece)
                f.write(piece)
            f.write(mac.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _sync_folder(path)
    except (OSError, KeyFileError) as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _unwritten(path, e) from None


def _pieces(manifest: dict[str, Any], parts: list[bytes]) -> Iterator[bytes]:
    """The bytes of a snapshot file before its HMAC."""
    yield MAGIC
    yield json.dumps(manifest).encode() + b"\n"
    for blob in parts:
        yield len(blob).to_bytes(8, "big")
        yield blob


def _sync_folder(path: str) -> None:
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unwritten(snapshot: str, e: OSError | KeyFileError) -> SnapshotError:
    """The error of a snapshot (or a part of it) that could not be written."""
    if isinstance(e, KeyFileError):
        return SnapshotError(str(e))
    return SnapshotError(cannot_write(f"the snapshot {snapshot}", e))


def read_file(
    path: str,
    parts: bool = True,
    trust: bool = False,
    warn: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], list[bytes]]:
    """The manifest and (if ``parts``) the parts of the snapshot file ``path``, once its
    HMAC is found to be the user's key's. ``trust``: take a file that is not authenticated
    (another key's, changed, or of format 1) all the same, after calling ``warn`` with what
    is said about it.

    Raises:
        SnapshotError: not a snapshot file, one cut short, one not authenticated (unless
            ``trust``; the message says why and how to trust it), or the key cannot be read.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise SnapshotError(f"cannot read the snapshot {path}: {e}") from None
    body = _authentic(path, memoryview(raw), trust, warn)
    end = raw.find(b"\n", len(MAGIC), len(body))
    try:
        manifest = json.loads(raw[len(MAGIC) : end] if end > 0 else b"")
    except ValueError as e:
        raise SnapshotError(f"cannot read the snapshot {path}: {e}") from None
    at = end + 1
    blobs = []
    while parts and at < len(body):
        n = int.from_bytes(body[at : at + 8], "big")
        blob = bytes(body[at + 8 : at + 8 + n])
        if at + 8 > len(body) or len(blob) != n:
            raise SnapshotError(f"{path} is cut short")
        blobs.append(blob)
        at += 8 + n
    return manifest, blobs


def _authentic(
    path: str, data: memoryview, trust: bool, warn: Callable[[str], None] | None
) -> memoryview:
    """The bytes of the snapshot file ``path`` (``data``) before its HMAC, once it is
    authenticated or ``trust`` takes it (see :func:`read_file`)."""
    if data[: len(MAGIC)] == MAGIC and len(data) >= len(MAGIC) + SIZE:
        body = data[:-SIZE]
        try:
            why = None if matches(new_mac(body), data[-SIZE:]) else CHANGED
        except KeyFileError as e:
            raise SnapshotError(str(e)) from None
    elif data[: len(OLD_MAGIC)] == OLD_MAGIC:
        body, why = data, OLDER
    else:
        raise SnapshotError(f"{path} is not a snapshot file")
    if why is not None:
        if not trust:
            raise SnapshotError(refusal(f"cannot resume from {path}", why))
        if warn is not None:
            warn(trusted(path, why))
    return body


def check_key() -> None:
    """Read (or make) the user's key now, so that a run that takes snapshots fails at its
    first tag, not at its first snapshot, when it cannot.

    Raises:
        SnapshotError: the key cannot be read or made (the message says where and why).
    """
    try:
        user_key()
    except KeyFileError as e:
        raise SnapshotError(str(e)) from None


def write_part(path: str, blob: bytes, snapshot: str) -> None:
    """Write a worker's part ``blob`` (a pickle) of the snapshot file ``snapshot`` to
    ``path``, followed by its HMAC (of :data:`PART_LABEL`, the part's file name and
    ``blob``): temporary file, then rename.

    Raises:
        SnapshotError: it cannot be written (nothing is left; the message names
            ``snapshot``), or the key cannot be read.
    """
    tmp = path + ".tmp"
    try:
        mac = new_mac(PART_LABEL, os.path.basename(path).encode(), b"\n", blob)
        with open(tmp, "wb") as f:
            f.write(blob)
            f.write(mac.digest())
        os.replace(tmp, path)
    except (OSError, KeyFileError) as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _unwritten(snapshot, e) from None


def read_part(path: str) -> bytes:
    """The pickle of the worker's part ``path`` (see :func:`write_part`), once its HMAC is
    checked.

    Raises:
        SnapshotError: it cannot be read, or is not authenticated by the user's key.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
        blob, given = data[:-SIZE], data[-SIZE:]
        mac = new_mac(PART_LABEL, os.path.basename(path).encode(), b"\n", blob)
    except OSError as e:
        raise SnapshotError(f"cannot read the snapshot part {path}: {e.strerror}") from None
    except KeyFileError as e:
        raise SnapshotError(str(e)) from None
    if len(data) < SIZE or not matches(mac, given):
        raise SnapshotError(f"the snapshot part {path} is not authenticated by your key: {CHANGED}")
    return blob


def _parts_marker(run_id: str) -> str:
    return scratch_file(run_id, "snapshot-parts")


def note_parts(run_id: str, directory: str) -> None:
    """Say (in a file of the temporary folder) that the workers of the run ``run_id`` write
    their parts into ``directory``, so that :func:`discard_parts` finds those a failed run
    leaves. Nothing happens if the note cannot be written."""
    with contextlib.suppress(OSError), open(_parts_marker(run_id), "w", encoding="utf-8") as f:
        f.write(directory)


def discard_parts(run_id: str) -> None:
    """After the run ``run_id`` (its workers ended, however): remove the parts it left (of a
    snapshot that a failed run did not join), and the note of :func:`note_parts`."""
    marker = _parts_marker(run_id)
    try:
        with open(marker, encoding="utf-8") as f:
            directory = f.read()
    except OSError:
        return
    for p in glob.glob(os.path.join(glob.escape(directory), f".*{run_id[:8]}*.part*")):
        with contextlib.suppress(OSError):
            os.unlink(p)
    with contextlib.suppress(OSError):
        os.unlink(marker)


def newest(path: str) -> str:
    """The snapshot file ``path``, or the newest snapshot (most tags) in directory ``path``
    (or in its :data:`CHECKPOINTS` folder when ``path`` itself holds none).

    Raises:
        SnapshotError: no such file, or a directory without snapshots.
    """
    if os.path.isdir(path):
        files = sorted(n for n in os.listdir(path) if n.endswith(SUFFIX))
        inner = os.path.join(path, CHECKPOINTS)
        if not files and os.path.isdir(inner):
            return newest(inner)
        if not files:
            raise SnapshotError(f"no snapshot (*{SUFFIX}) in {path}")
        return os.path.join(path, max(files, key=_tags_of))
    if not os.path.exists(path):
        raise SnapshotError(f"no snapshot {path}")
    return path


def _tags_of(name: str) -> tuple[int, str]:
    digits = name[: -len(SUFFIX)].rpartition(".")[2]
    return (int(digits) if digits.isdigit() else -1), name
