"""A recording's file: what ``--record`` writes and ``--replay`` reads
(:mod:`reactors.replay`).

``MAGIC``, one line of JSON (the manifest: program, graph hash, start time, worker count, the
main parameters given on the command line, which a replay takes too), then chunks, each an
8-byte big-endian length and a pickle of a list of records: first ``("w", (port, ...))``, the
ports the recorder checks (None: all), then ``("a", elapsed ns, microstep, action, value)``,
``("c", elapsed ns, microstep, reactor, value ns)``, ``("d", elapsed ns, microstep, (port,
...), [crc, ...])`` at each tag the recorder checked (:func:`reactors.checksums.sums_of`: the
ports present among those it checks), ``("t", elapsed ns, microstep)``, the latest tag ended,
at the end of each chunk, and ``("end", elapsed ns, microstep)``. A chunk is written every
:data:`CHUNK` records or :data:`FLUSH_S` seconds and at the end; a run that is killed leaves
every chunk it wrote complete (a torn last chunk is ignored on reading), and its replay stops
at the last tag recorded, which it does not check (the recorded run was cut short during it).
On several workers each writes ``FILE.w<k>`` and the parts are joined into ``FILE`` when the
run ends (a replay reads the parts of a run killed before that). Values are pickled: a
recording is trusted like code; replay only your own.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
from dataclasses import dataclass, field
from typing import Any

from .engine import TagPair
from .program import Program
from .snapshot_file import fingerprint, graph_hash

MAGIC = b"LFRECORDING 2\n"
#: What every version's MAGIC starts with.
FAMILY = b"LFRECORDING "
#: Records per chunk, and the seconds after which a chunk is written anyway (checked every
#: 64 records): what a killed run can lose at most.
CHUNK = 4096
FLUSH_S = 0.25
#: The length before each chunk.
LENGTH = struct.Struct(">Q")


class ReplayError(Exception):
    """A recording cannot be written, read or used, or the replay departed from it (the
    message says where)."""


@dataclass
class Recording:
    """A recording read back. Tags are (elapsed ns, microstep).

    ``events``: physical action full name -> its events ``(t, m, value)`` in tag order;
    ``clocks``: (t, m, reactor) -> the physical times (ns) its reactions read; ``digests``:
    tag -> port full name -> CRC-32 (:func:`reactors.checksums.sums_of`) of the ports present;
    ``checked``: tag -> the ports checked there (None: all), for the tags checked; ``end``:
    the final tag when the run finished, else None; ``last``: the last tag the file shows ended.
    """

    manifest: dict
    events: dict[str, list[tuple[int, int, Any]]] = field(default_factory=dict)
    clocks: dict[tuple[int, int, str], list[int]] = field(default_factory=dict)
    digests: dict[TagPair, dict[str, int]] = field(default_factory=dict)
    checked: dict[TagPair, frozenset[str] | None] = field(default_factory=dict)
    end: TagPair | None = None
    last: TagPair | None = None

    @property
    def stop(self) -> TagPair | None:
        """The stop tag of a replay: the final tag, or the last recorded one of a run that did
        not finish."""
        return self.end if self.end is not None else self.last

    @property
    def start_time(self) -> int:
        """The recorded run's start time (ns since the epoch)."""
        return int(self.manifest["start_time"])


def parts_of(path: str) -> list[str]:
    """The files of the recording ``path``: itself, or the worker parts a killed run left."""
    if os.path.exists(path):
        return [path]
    parts = []
    k = 0
    while os.path.exists(f"{path}.w{k}"):
        parts.append(f"{path}.w{k}")
        k += 1
    return parts


def _read(path: str) -> tuple[dict, list[tuple]]:
    """The manifest and records of one file (a torn last chunk is left out).

    Raises:
        ReplayError: not a recording.
    """
    with open(path, "rb") as f:
        magic = f.read(len(MAGIC))
        if magic != MAGIC:
            if magic.startswith(FAMILY):
                raise ReplayError(
                    f"{path} was recorded by another version of this runtime: record it again"
                )
            raise ReplayError(f"{path} is not a recording (made with --record)")
        try:
            manifest = json.loads(f.readline())
        except ValueError:
            raise ReplayError(f"{path}: the recording's manifest is damaged") from None
        records: list[tuple] = []
        while True:
            head = f.read(LENGTH.size)
            if len(head) < LENGTH.size:
                break
            data = f.read(LENGTH.unpack(head)[0])
            try:
                records += pickle.loads(data)
            except Exception:
                break  # a torn last chunk: the run was killed while writing it
    return manifest, records


def load(path: str) -> Recording:
    """Read the recording ``path`` (or the worker parts of a run killed before joining them),
    once per process while its files stay the same (the launcher checks it before the
    schedulers of the same process replay it; nothing reads a Recording but to look).

    Raises:
        ReplayError: no such recording, or not a recording.
    """
    parts = parts_of(path)
    if not parts:
        raise ReplayError(f"--replay: no recording {path}")
    stats = [os.stat(p) for p in parts]
    key = tuple((p, st.st_mtime_ns, st.st_size) for p, st in zip(parts, stats))
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = _load(parts)
    return _LOADED[key]


#: The latest recording read, by its files' (path, mtime ns, size).
_LOADED: dict[tuple, Recording] = {}


def _load(parts: list[str]) -> Recording:
    """The recording in the files ``parts`` (see :func:`load`)."""
    rec: Recording | None = None
    for p in parts:
        manifest, records = _read(p)
        if rec is None:
            rec = Recording(manifest)
        _index(rec, records)
    assert rec is not None
    for events in rec.events.values():
        events.sort(key=lambda e: (e[0], e[1]))
    return rec


def _index(rec: Recording, records: list[tuple]) -> None:
    events, clocks, digests, checked = rec.events, rec.clocks, rec.digests, rec.checked
    watch: frozenset[str] | None = None  # the ports this file's recorder checks
    last = rec.last
    for r in records:
        kind = r[0]
        if kind == "d":
            tag = (r[1], r[2])
            digests.setdefault(tag, {}).update(zip(r[3], r[4]))
            if tag not in checked:
                checked[tag] = watch
            elif (seen := checked[tag]) is not None and watch is not None:
                checked[tag] = seen | watch  # several workers checked it
            else:
                checked[tag] = None
            if last is None or tag > last:
                last = tag
        elif kind == "t":
            if last is None or (r[1], r[2]) > last:
                last = (r[1], r[2])
        elif kind == "w":
            watch = None if r[1] is None else frozenset(r[1])
        elif kind == "c":
            clocks.setdefault((r[1], r[2], r[3]), []).append(r[4])
        elif kind == "a":
            events.setdefault(r[3], []).append((r[1], r[2], r[4]))
        elif kind == "end":
            rec.end = (r[1], r[2])
    rec.last = last


def join(path: str, workers: int) -> None:
    """Join the worker parts ``path``.w<k> of a run into ``path`` (one manifest, every chunk)
    and remove them. Nothing happens when no part exists."""
    parts = [f"{path}.w{k}" for k in range(workers) if os.path.exists(f"{path}.w{k}")]
    if not parts:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as out:
        for i, p in enumerate(parts):
            with open(p, "rb") as f:
                head = f.read(len(MAGIC))
                manifest = f.readline()
                if i == 0:
                    out.write(head + manifest)
                out.write(f.read())
    os.replace(tmp, path)
    for p in parts:
        os.unlink(p)


def manifest(graph: Program, workers: int) -> dict:
    """The head of a recording of ``graph`` on ``workers`` workers (the start time is added
    when the run starts)."""
    return {
        "program": graph.name,
        "graph": graph_hash(graph, fingerprint(graph)),
        "workers": workers,
    }
