"""The snapshot file of a checkpoint (:mod:`reactors.checkpoint`): its name, its format,
reading and writing it, and whether it can resume a given program.

A file is :data:`MAGIC`, one line of JSON (the manifest), then the parts, each an 8-byte
big-endian length and a pickle; it is written to a temporary name, fsynced and renamed. Its
name is ``<program>.<tags:012d>.lfsnap`` (:func:`snapshot_path`). Whether it can resume a
program is decided from the manifest's hashes of the graph (:func:`fingerprint`,
:func:`graph_hash`) before anything is unpickled (:func:`usable`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import sys
from typing import Any

from .jsonform import encode
from .program import Program
from .snapshot import SnapshotError

#: The folder of a directory (an RL run's) where ``--resume DIR`` also looks for snapshots.
CHECKPOINTS = "checkpoints"
MAGIC = b"LFSNAPSHOT 1\n"
SUFFIX = ".lfsnap"
FORMAT = 1
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
    if manifest.get("format") != FORMAT:
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


def usable(path: str, graph: Program) -> str:
    """The snapshot file that ``--resume path`` names (see :func:`newest`), after checking
    from its manifest that it can resume ``graph``.

    Raises:
        SnapshotError: it cannot (the message says what differs).
    """
    found = newest(path)
    manifest, _ = read_file(found, parts=False)
    why = compatibility(manifest, graph)
    if why is not None:
        raise SnapshotError(f"cannot resume from {found}: {why}")
    return found


# --------------------------------------------------------------------------- files


def write_file(path: str, manifest: dict[str, Any], parts: list[bytes]) -> None:
    """Write a snapshot file atomically: temporary file, fsync, rename (and fsync the
    directory)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(MAGIC)
        f.write(json.dumps(manifest).encode() + b"\n")
        for blob in parts:
            f.write(len(blob).to_bytes(8, "big"))
            f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path: str, parts: bool = True) -> tuple[dict[str, Any], list[bytes]]:
    """The manifest and (if ``parts``) the parts of the snapshot file ``path``.

    Raises:
        SnapshotError: not a snapshot file, or one cut short.
    """
    try:
        with open(path, "rb") as f:
            if f.readline() != MAGIC:
                raise SnapshotError(f"{path} is not a snapshot file")
            manifest = json.loads(f.readline())
            blobs = []
            while parts:
                head = f.read(8)
                if not head:
                    break
                n = int.from_bytes(head, "big")
                blob = f.read(n)
                if len(head) != 8 or len(blob) != n:
                    raise SnapshotError(f"{path} is cut short")
                blobs.append(blob)
    except (OSError, ValueError) as e:
        raise SnapshotError(f"cannot read the snapshot {path}: {e}") from None
    return manifest, blobs


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


def snapshot_path(directory: str, program: str, tags: int) -> str:
    """The file of the snapshot taken after ``tags`` tags of ``program``."""
    return os.path.join(directory, f"{program}.{tags:012d}{SUFFIX}")


def prune(directory: str, program: str, keep: int) -> None:
    """Remove all but the ``keep`` newest snapshots of ``program`` in ``directory``."""
    mine = [n for n in os.listdir(directory) if n.startswith(program + ".") and n.endswith(SUFFIX)]
    for name in sorted(mine, key=_tags_of)[:-keep]:
        try:
            os.unlink(os.path.join(directory, name))
        except FileNotFoundError:
            pass
