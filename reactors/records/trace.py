"""Recorders of a run: the digest of every port value at every tag, and a timing trace.

**Digest** (``--digest FILE``). At the end of every tag, each worker hashes every present port
channel that it writes: one line ``<elapsed ns> <microstep> <port>[<channel>] <sha256>``, the
elapsed time counted from the start tag (so runs compare). The value is encoded stably: a
numpy array as dtype, shape and C-order bytes; a torch tensor through numpy; anything else as
``pickle`` protocol 5 (run with a fixed ``PYTHONHASHSEED`` when values hold sets of strings);
an object pickle refuses is named by its type. The run writes one file, sorted by (tag,
port); two runs computed the same values iff the files are equal. Files hold hex digests
only: nothing is ever unpickled from them. The file is written however the run ends; a run
that fails or is stopped records every tag before the one in progress, which it left at a
point that depends on the worker count (so a failing run's digest compares across workers too).
A digest that cannot be written whole (a full disk) is cut back to its last whole line and
the run fails (:class:`reactors.core.errors.RecordError`). On several workers each writes its part,
ending with the line :data:`WHOLE`; a part without it was cut short, and the merged file then
holds only the tags before the last one that part shows (all of them complete).

**Timing trace** (target property ``tracing: true``). Each worker records the start and end
of every reaction; the run writes ``<Name>.trace.json`` in the Chrome/Perfetto "traceEvents"
format (one process row per worker) into the current directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import pickle
import sys
import threading
from collections.abc import Callable, Iterable
from time import perf_counter_ns
from typing import Any, Protocol

from ..core.engine import TagPair
from ..core.errors import RecordError, cannot_write
from ..core.pending import current
from ..core.port import CHANNELS, Port
from ..core.reaction import Entry
from ..core.scheduler import Scheduler


def encode(value: Any) -> bytes:
    """The stable byte encoding of a port value hashed into the digest."""
    # a module being imported by another thread may lack its attributes yet
    tensor = getattr(sys.modules.get("torch"), "Tensor", None)
    np = sys.modules.get("numpy")  # no numpy imported: no value can be an array
    ndarray = getattr(np, "ndarray", None)
    if tensor is not None and isinstance(value, tensor):
        value = value.detach().cpu().resolve_conj().resolve_neg()
        try:
            value = value.numpy()
        except (TypeError, RuntimeError):
            value = value.float().numpy()
    if ndarray is not None and isinstance(value, ndarray) and not value.dtype.hasobject:
        head = f"ndarray {value.dtype.str} {value.shape}".encode()
        return head + np.ascontiguousarray(value).tobytes()  # type: ignore[union-attr]  # ndarray came from np
    try:
        return _unshared_pickle(value)
    except Exception:
        return f"unpicklable {type(value).__module__}.{type(value).__qualname__}".encode()


def _unshared_pickle(value: Any) -> bytes:
    """``value`` pickled without the memo (pickle's "fast" mode), so that its bytes do not
    depend on which of its parts are one object: equal values encode alike whether or not
    they share, say, a numpy dtype (an unpickled array's dtype is a copy of the canonical one,
    so the same batch built from arrays that crossed workers would otherwise encode
    differently). A value that contains itself is pickled with the memo."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=5)
    pickler.fast = True
    try:
        pickler.dump(value)
    except ValueError:  # a cycle
        return pickle.dumps(value, protocol=5)
    return buf.getvalue()


class Digest:
    """Collects digest lines. ``watch``: the port objects to record (None: every port)."""

    def __init__(self, watch: Iterable[Port] | None = None):
        self.watch = None if watch is None else {id(p) for p in watch}
        self.lines: list[tuple[int, int, str, str]] = []  # (elapsed ns, microstep, port, hash)
        self.written = False  # written (or tried: once is enough)

    def record(self, sched: Scheduler, present: list[Any] | None = None) -> None:
        """Hash the ports present at the scheduler's current tag (or in ``present``)."""
        self._add(
            sched.time - sched.start_time,
            sched.micro,
            sched.present if present is None else present,
        )

    def _add(self, t: int, m: int, present: Iterable[Any]) -> None:
        watch = self.watch
        for obj in present:
            if obj.__class__ in CHANNELS and (watch is None or id(obj) in watch):
                h = hashlib.sha256(encode(current(obj))).hexdigest()
                self.lines.append((t, m, obj._name, h))

    def write(self, path: str, name: str) -> None:
        """Write the lines, in tag order, to the part file ``path`` of the digest ``name``
        (the file the user named), then :data:`WHOLE`; :func:`merge` sorts and combines.

        Raises:
            RecordError: it cannot be written whole (it is cut back to its last whole line;
                the message names ``name``).
        """
        self.written = True
        _write_lines(path, name, self.lines, WHOLE)

    def write_sorted(self, path: str) -> None:
        """Write the lines, sorted by (tag, port), to the digest ``path`` (one worker).

        Raises:
            RecordError: it cannot be written whole (it is cut back to its last whole line).
        """
        self.written = True
        _write_lines(path, path, sorted(self.lines))


#: The last line of a worker's digest part written whole.
WHOLE = "whole\n"

Row = tuple[int, int, str, str]


def merge(parts: Iterable[str], path: str, before: TagPair | None = None) -> None:
    """Combine digest files ``parts`` into ``path``, sorted by (tag, port); removes them.
    ``before``: keep only the lines of tags (elapsed ns, microstep) before it (a run cut
    short at that tag); None keeps every line. A part cut short (without :data:`WHOLE`) keeps
    the lines of the tags before its last line's, of every part.

    Raises:
        RecordError: ``path`` cannot be written whole (it is cut back to its last whole line).
    """
    rows: list[Row] = []
    for p in parts:
        if not os.path.exists(p):  # a worker that wrote nothing (it was stopped)
            continue
        with open(p, encoding="utf-8") as f:
            lines = f.readlines()
        os.unlink(p)
        whole = bool(lines) and lines[-1] == WHOLE
        mine = _rows(lines[:-1] if whole else lines)
        if not whole:  # its last tag may lack lines, and the tags after it do
            last = (mine[-1][0], mine[-1][1]) if mine else (-1, 0)
            before = last if before is None else min(before, last)
        rows += mine
    if before is not None:
        rows = [r for r in rows if (r[0], r[1]) < before]
    rows.sort()
    _write_lines(path, path, rows)


def _rows(lines: list[str]) -> list[Row]:
    """The rows of digest lines, up to the first that is not whole."""
    rows = []
    for line in lines:
        fields = line.split()
        if len(fields) != 4 or not line.endswith("\n"):
            break
        rows.append((int(fields[0]), int(fields[1]), fields[2], fields[3]))
    return rows


def _write_lines(path: str, name: str, rows: Iterable[Row], end: str = "") -> None:
    """Write digest lines ``rows`` and ``end`` to ``path`` (of the digest ``name``).

    Raises:
        RecordError: see :meth:`Digest.write`.
    """
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{t} {m} {port} {h}\n" for t, m, port, h in rows)
            f.write(end)
    except OSError as e:
        _cut_to_line(path)
        raise RecordError(f"--digest: {cannot_write(name, e)}") from None


def _cut_to_line(path: str) -> None:
    """Cut the regular file ``path`` back to its last whole line (nothing if it is none)."""
    with contextlib.suppress(OSError), open(path, "rb+") as f:
        if not os.path.isfile(path):
            return
        end = f.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - 4096)
            f.seek(start)
            at = f.read(end - start).rfind(b"\n")
            if at >= 0:
                f.truncate(start + at + 1)
                return
            end = start
        f.truncate(0)


#: A per-tag hook of the one-worker loop: ``hook(elapsed ns, microstep, present)``.
TagHook = Callable[[int, int, Iterable[Any]], None]


class TagRecorder(Protocol):
    """What a parallel worker calls at the end of each tag (a :class:`Digest`, a recording)."""

    def record(self, sched: Scheduler) -> None: ...


class _Recording(list):
    """The one-worker scheduler's ``present`` list, calling its ``hooks`` (the digest's,
    the recording's) with each tag before the per-tag clear.

    The single-worker loop updates its tag, resets the flags and then calls ``clear()``, so
    the tag being left is remembered here; no cost is added to the unrecorded path.
    """

    def __init__(self, sched: Scheduler, hooks: list[TagHook]):
        super().__init__()
        self.hooks = hooks
        self.sched = sched
        self.tag: TagPair | None = None

    def clear(self) -> None:
        s = self.sched
        t, m = self.tag if self.tag is not None else (s.start_time, 0)
        for hook in self.hooks:
            hook(t - s.start_time, m, self)
        self.tag = (s.time, s.micro)
        super().clear()

    def final(self, hook: TagHook) -> None:
        """Give ``hook`` the last tag (its presence is never cleared)."""
        s = self.sched
        hook(s.time - s.start_time, s.micro, self)


def record_single(sched: Scheduler, hooks: list[TagHook]) -> _Recording:
    """Make the one-worker ``sched`` call ``hooks`` at the end of each tag (but the last: see
    :meth:`_Recording.final`)."""
    rec = _Recording(sched, hooks)
    sched.present = rec
    sched._attach()
    return rec


class Recorders:
    """Several per-tag recorders of a parallel worker as one (``record(sched)`` each)."""

    def __init__(self, *parts: Any):
        self.parts = parts

    def record(self, sched: Scheduler) -> None:
        """The current tag of ``sched`` ended: each part records it."""
        for p in self.parts:
            p.record(sched)


class Timeline:
    """Reaction start/end times of one worker (``pid``), for a Chrome/Perfetto trace."""

    def __init__(self, pid: int):
        self.pid = pid
        # (reaction, start ns, end ns, thread row: 0 for the worker's tags)
        self.events: list[tuple[str, int, int, int]] = []
        self.written = False  # written (or tried: once is enough)

    def wrap(self, sched: Scheduler) -> None:
        """Time every reaction of ``sched`` (wraps its dispatch table)."""
        table = sched.table
        for rank, entry in enumerate(table):
            if entry is not None:
                reaction = sched.program.reactions[rank]
                assert reaction is not None  # an entry exactly where this worker has a reaction
                table[rank] = (self._timed(entry, reaction.describe()), ())

    def _timed(self, entry: Entry, name: str) -> Callable[[], None]:
        fn, args = entry
        events = self.events

        def timed() -> None:
            _running.timeline = self  # what running_timeline() answers in this reaction
            t0 = perf_counter_ns()
            try:
                fn(*args)
            finally:
                events.append((name, t0, perf_counter_ns(), 0))

        return timed

    def span(self, name: str, start: int, end: int, row: int = 0) -> None:
        """Add an event ``name`` from ``start`` to ``end`` (``perf_counter_ns``, ns): what a
        worker spends waiting for the others (``sync: ...``), on the worker's row of tags;
        or, with ``row`` > 0, work a reaction started on another thread of the worker (a
        learner's background update), on a row of its own below the tags it overlaps."""
        self.events.append((name, start, end, row))

    def write(self, path: str, name: str) -> None:
        """Write the events to ``path``, a part of the trace ``name`` (once).

        Raises:
            RecordError: see :func:`write_timeline`.
        """
        self.written = True
        write_timeline(self.json_events(), path, name)

    def json_events(self) -> list[dict[str, Any]]:
        return [
            {"name": n, "ph": "X", "pid": self.pid, "tid": t, "ts": a / 1000, "dur": (b - a) / 1000}
            for n, a, b, t in self.events
        ]


#: the Timeline of the reaction running on each thread (set as each timed reaction starts)
_running = threading.local()


def running_timeline() -> Timeline | None:
    """The timing trace of the worker whose reaction is running on this thread, or None
    (tracing is off, or no timed reaction ran on this thread). A reaction that starts work on
    another thread adds that work's :meth:`Timeline.span` here once it collects it."""
    return getattr(_running, "timeline", None)


def write_timeline(events: Any, path: str, name: str | None = None) -> None:
    """Write Chrome/Perfetto trace events to ``path`` (the events alone, a list, to a worker's
    part of the trace ``name``).

    Raises:
        RecordError: it cannot be written (nothing of it is left, if it is a regular file).
    """
    whole = events if name is not None else {"traceEvents": events, "displayTimeUnit": "ms"}
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(whole, f)
    except OSError as e:
        if os.path.isfile(path):
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise RecordError(f"the timing trace: {cannot_write(name or path, e)}") from None
