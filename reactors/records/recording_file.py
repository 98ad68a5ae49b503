"""A recording's file: what ``--record`` writes and ``--replay`` reads
(:mod:`reactors.records.replay`).

``MAGIC``, one line of JSON (the manifest: program, graph hash, start time, worker count, the
main parameters given on the command line, which a replay takes too) and its HMAC-SHA256 under
the user's key (:mod:`reactors.records.user_key`), then chunks, each an 8-byte big-endian length, a
pickle of a list of records and the HMAC of the previous HMAC, the length and the pickle: each
chunk's HMAC authenticates the file up to its end, so a recording cut after any whole chunk
still reads, and one changed anywhere (or of another key) does not. Records: first ``("w",
(port, ...))``, the ports the recorder checks (None: all), then ``("a", elapsed ns, microstep,
action, value)``, ``("c", elapsed ns, microstep, reactor, value ns)``, ``("d", elapsed ns,
microstep, (port, ...), [crc, ...])`` at each tag the recorder checked
(:func:`reactors.records.port_checksums.sums_of`: the ports present among those it checks), ``("t",
elapsed ns, microstep)``, the latest tag ended, at the end of each chunk, and ``("end",
elapsed ns, microstep)``. A chunk is written every :data:`CHUNK` records or :data:`FLUSH_S`
seconds and at the end; a run that is killed leaves every chunk it wrote complete (a torn last
chunk is ignored on reading), and one that cannot write a chunk (a full disk) cuts its file
back to the last whole one (:class:`Writer`); its replay stops at the last tag recorded, which
it does not check (the recorded run was cut short during it). Reading checks every HMAC before
the chunk is unpickled: a file that is not authenticated is refused unless trusted
(``--trust``), and so is a file of format 2 (:data:`OLD_MAGIC`), which had no HMACs. On
several workers each writes its part (:func:`part_file`) and the parts are checked and joined
into ``FILE`` when the run ends (:func:`join`; a replay reads the parts of a run killed before
that, or whose join could not be written), and the replay stops at the last tag that every
part recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ..core.engine import TagPair
from ..core.errors import cannot_write
from ..model.program import Program
from .snapshot_file import fingerprint, graph_hash
from .user_key import CHANGED, OLDER, SIZE, KeyFileError, matches, new_mac, refusal, trusted

MAGIC = b"LFRECORDING 3\n"
#: The first line of a recording of format 2, whose chunks had no HMACs (read if trusted).
OLD_MAGIC = b"LFRECORDING 2\n"
#: What every version's MAGIC starts with.
FAMILY = b"LFRECORDING "
#: Records per chunk, and the seconds after which a chunk is written anyway (checked every
#: 64 records): what a killed run can lose at most.
CHUNK = 4096
FLUSH_S = 0.25
#: The length before each chunk.
LENGTH = struct.Struct(">Q")
#: The bytes of the HMAC after the manifest and after each chunk.
MAC_SIZE = SIZE


class ReplayError(Exception):
    """A recording cannot be written, read or used, or the replay departed from it (the
    message says where)."""


@dataclass
class Recording:
    """A recording read back. Tags are (elapsed ns, microstep).

    ``events``: physical action full name -> its events ``(t, m, value)`` in tag order;
    ``clocks``: (t, m, reactor) -> the physical times (ns) its reactions read; ``digests``:
    tag -> port full name -> CRC-32 (:func:`reactors.records.port_checksums.sums_of`) of the ports
    present; ``checked``: tag -> the ports checked there (None: all), for the tags checked; ``end``:
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


def part_file(path: str, run_id: str, worker: int) -> str:
    """Where worker ``worker`` of the run ``run_id`` writes its part of the file ``path`` (a
    recording, a digest) for the supervisor to join: ``path.w<worker>`` beside it, or in the
    temporary folder when ``path`` exists and is not a regular file (``/dev/full``, a pipe)."""
    if os.path.exists(path) and not os.path.isfile(path):
        name = f"lf-parts-{run_id}-{os.path.basename(path)}.w{worker}"
        return os.path.join(tempfile.gettempdir(), name)
    return f"{path}.w{worker}"


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


class Writer:
    """Writes the recording file ``path`` (a worker's part of ``name``, the file the user
    named, or that file itself): :meth:`head`, then :meth:`chunk` after chunk, each with its
    HMAC. A write that fails cuts the file back to its last whole chunk.

    Raises:
        ReplayError: ``path`` cannot be opened (the message names ``name``).
    """

    def __init__(self, path: str, name: str):
        self.name = name
        self.mac = b""  # the latest HMAC written, which the next chunk's covers
        self.whole = 0  # the file's length up to its last whole chunk
        self.broken = False  # a write failed: nothing more is written
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        except OSError as e:
            raise ReplayError(f"--record: {cannot_write(name, e)}") from None

    def head(self, manifest: dict) -> None:
        """Write ``MAGIC``, ``manifest`` and its HMAC.

        Raises:
            ReplayError: it cannot be written, or the key cannot be read.
        """
        line = MAGIC + json.dumps(manifest, sort_keys=True).encode() + b"\n"
        self._put(line, self._mac(line))

    def chunk(self, data: bytes) -> None:
        """Write the chunk ``data`` (a pickle of records) and its HMAC.

        Raises:
            ReplayError: it cannot be written (the file ends at its previous chunk).
        """
        head = LENGTH.pack(len(data))
        self._put(head, data, self._mac(self.mac, head, data))

    def close(self) -> None:
        """Close the file (once)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _mac(self, *pieces: bytes) -> bytes:
        try:
            return new_mac(*pieces).digest()
        except KeyFileError as e:
            self.broken = True
            raise ReplayError(str(e)) from None

    def _put(self, *pieces: bytes) -> None:
        if self.broken or self.fd < 0:
            return
        try:
            for piece in pieces:
                view = memoryview(piece)
                while view:
                    view = view[os.write(self.fd, view) :]
        except OSError as e:
            self.broken = True
            with contextlib.suppress(OSError):  # (a device such as /dev/full has no length)
                os.ftruncate(self.fd, self.whole)
            raise ReplayError(f"--record: {cannot_write(self.name, e)}") from None
        self.whole += sum(map(len, pieces))
        self.mac = pieces[-1]


def _chunks(
    path: str, f: BinaryIO, trust: bool, warn: Callable[[str], None] | None
) -> tuple[dict, Iterator[bytes]]:
    """The manifest of the recording file ``f`` (``path``) and its chunks' pickles, each once
    its HMAC is checked (a torn last chunk ends them).

    Raises:
        ReplayError: not a recording, or not authenticated (unless ``trust``), as they come.
    """
    magic = f.read(len(MAGIC))
    if magic not in (MAGIC, OLD_MAGIC):
        if magic.startswith(FAMILY):
            raise ReplayError(
                f"{path} was recorded by another version of this runtime: record it again"
            )
        raise ReplayError(f"{path} is not a recording (made with --record)")
    line = f.readline()
    try:
        manifest = json.loads(line)
    except ValueError:
        raise ReplayError(f"{path}: the recording's manifest is damaged") from None
    macs = magic == MAGIC  # (format 2 had none)
    prev = f.read(MAC_SIZE) if macs else b""
    checked = macs and _authentic(prev, magic + line)
    if not checked:
        _untrusted(path, CHANGED if macs else OLDER, trust, warn)  # then taken as it is
    return manifest, _verified(path, f, prev, (macs, checked), trust, warn)


def _verified(
    path: str,
    f: BinaryIO,
    prev: bytes,
    how: tuple[bool, bool],
    trust: bool,
    warn: Callable[[str], None] | None,
) -> Iterator[bytes]:
    """The pickles of the chunks of ``f`` (after its manifest's HMAC ``prev``); ``how``:
    whether the file has HMACs, and whether they are still checked (not once a file taken on
    trust was said to be unauthenticated); see :func:`_chunks`."""
    macs, checked = how
    while True:
        head = f.read(LENGTH.size)
        if len(head) < LENGTH.size:
            return
        data = f.read(LENGTH.unpack(head)[0])
        mac = f.read(MAC_SIZE) if macs else b""
        if len(data) < LENGTH.unpack(head)[0] or len(mac) < (MAC_SIZE if macs else 0):
            return  # a torn last chunk: the run was killed while writing it
        if checked and not _authentic(mac, prev, head, data):
            _untrusted(path, CHANGED, trust, warn)
            checked = False  # taken as it is, said once
        prev = mac
        yield data


def _authentic(mac: bytes, *pieces: bytes) -> bool:
    try:
        return len(mac) == MAC_SIZE and matches(new_mac(*pieces), mac)
    except KeyFileError as e:
        raise ReplayError(str(e)) from None


def _untrusted(path: str, why: str, trust: bool, warn: Callable[[str], None] | None) -> None:
    """A recording file that is not authenticated for ``why``: refused, or said to ``warn``
    if ``trust``."""
    if not trust:
        raise ReplayError(refusal(f"--replay: {path}", why))
    if warn is not None:
        warn(trusted(path, why))


def _read(
    path: str, trust: bool = False, warn: Callable[[str], None] | None = None
) -> tuple[dict, list[tuple]]:
    """The manifest and records of one file (a torn last chunk is left out).

    Raises:
        ReplayError: not a recording, or not authenticated (unless ``trust``).
    """
    records: list[tuple] = []
    with open(path, "rb") as f:
        manifest, chunks = _chunks(path, f, trust, warn)
        for data in chunks:
            try:
                records += pickle.loads(data)
            except Exception:
                break  # (trusted) a torn last chunk: the run was killed while writing it
    return manifest, records


def load(path: str, trust: bool = False, warn: Callable[[str], None] | None = None) -> Recording:
    """Read the recording ``path`` (or the worker parts of a run killed before joining them),
    once per process while its files stay the same (the launcher checks it before the
    schedulers of the same process replay it; nothing reads a Recording but to look).
    ``trust``: take files that are not authenticated all the same, after calling ``warn``
    with what is said about each.

    Raises:
        ReplayError: no such recording, not a recording, or not authenticated (unless
            ``trust``; the message says why and how to trust it).
    """
    parts = parts_of(path)
    if not parts:
        raise ReplayError(f"--replay: no recording {path}")
    stats = [os.stat(p) for p in parts]
    key = (trust, *((p, st.st_mtime_ns, st.st_size) for p, st in zip(parts, stats)))
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = _load(parts, trust, warn)
    return _LOADED[key]


#: The latest recording read, by trust and its files' (path, mtime ns, size).
_LOADED: dict[tuple, Recording] = {}


def _load(parts: list[str], trust: bool, warn: Callable[[str], None] | None) -> Recording:
    """The recording in the files ``parts`` (see :func:`load`)."""
    rec: Recording | None = None
    lasts: list[TagPair | None] = []
    for p in parts:
        manifest, records = _read(p, trust, warn)
        if rec is None:
            rec = Recording(manifest)
        lasts += _index(rec, records)
    assert rec is not None
    for events in rec.events.values():
        events.sort(key=lambda e: (e[0], e[1]))
    rec.last = None if None in lasts else min(lasts, default=None)  # type: ignore[type-var]
    return rec


def _index(rec: Recording, records: list[tuple]) -> list[TagPair | None]:
    """Add ``records`` (those of one file) to ``rec``; the last tag each worker's part among
    them shows ended (a part begins with its ``"w"`` record)."""
    events, clocks, digests, checked = rec.events, rec.clocks, rec.digests, rec.checked
    watch: frozenset[str] | None = None  # the ports this part's recorder checks
    lasts: list[TagPair | None] = []
    last: TagPair | None = None
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
            if lasts or last is not None:
                lasts.append(last)
            watch, last = (None if r[1] is None else frozenset(r[1])), None
        elif kind == "c":
            clocks.setdefault((r[1], r[2], r[3]), []).append(r[4])
        elif kind == "a":
            events.setdefault(r[3], []).append((r[1], r[2], r[4]))
        elif kind == "end":
            rec.end = (r[1], r[2])
    return [*lasts, last]


def join(path: str, workers: int, run_id: str = "") -> None:
    """Join the worker parts of the recording ``path`` of the run ``run_id`` (see
    :func:`part_file`) into ``path``: one manifest, every chunk, with HMACs of its own, each
    part's checked as it is read. The parts are removed once joined. Nothing happens when no
    part exists.

    Raises:
        ReplayError: a part is not authenticated (nothing is joined), or ``path`` cannot be
            written: nothing of it is left, and the parts stay, which a replay of ``path``
            reads (those in the temporary folder, of a ``path`` that is not a regular file,
            are removed).
    """
    found = [p for k in range(workers) if os.path.exists(p := part_file(path, run_id, k))]
    parts = [p for p in found if os.path.getsize(p)]  # (empty: its worker failed at once)
    _remove([p for p in found if p not in parts])
    if not parts:
        return
    regular = not os.path.exists(path) or os.path.isfile(path)
    out = f"{path}.tmp" if regular else path
    try:
        _join(parts, out, path)
        if regular:
            os.replace(out, path)
    except ReplayError:
        if regular:
            for p in (out, path):  # a replay of path reads the parts
                with contextlib.suppress(OSError):
                    os.unlink(p)
        else:
            _remove(parts)
        raise
    _remove(parts)


def _join(parts: list[str], out: str, name: str) -> None:
    """Write the recording ``out`` (for the user's file ``name``) from the files ``parts``."""
    writer = Writer(out, name)
    try:
        for i, p in enumerate(parts):
            with open(p, "rb") as f:
                try:
                    manifest, chunks = _chunks(p, f, False, None)
                    pickles = list(chunks)
                except ReplayError:
                    raise ReplayError(
                        f"--record: cannot join the parts of {name}: {p} is not a recording "
                        "that your key authenticates"
                    ) from None
            if i == 0:
                writer.head(manifest)
            for data in pickles:
                writer.chunk(data)
    finally:
        writer.close()


def _remove(paths: list[str]) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            os.unlink(p)


def manifest(graph: Program, workers: int) -> dict:
    """The head of a recording of ``graph`` on ``workers`` workers (the start time is added
    when the run starts)."""
    return {
        "program": graph.name,
        "graph": graph_hash(graph, fingerprint(graph)),
        "workers": workers,
    }
