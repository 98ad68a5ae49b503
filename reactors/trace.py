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

**Timing trace** (target property ``tracing: true``). Each worker records the start and end
of every reaction; the run writes ``<Name>.trace.json`` in the Chrome/Perfetto "traceEvents"
format (one process row per worker) into the current directory.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import sys
from collections.abc import Callable, Iterable
from time import perf_counter_ns
from typing import Any, Protocol

from .engine import TagPair
from .port import CHANNELS, Port
from .reaction import Entry
from .scheduler import Scheduler


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
                h = hashlib.sha256(encode(obj._v)).hexdigest()
                self.lines.append((t, m, obj._name, h))

    def write(self, path: str) -> None:
        """Write the lines (unsorted) to ``path``; :func:`merge` sorts and combines."""
        with open(path, "w", encoding="utf-8") as f:
            for t, m, name, h in self.lines:
                f.write(f"{t} {m} {name} {h}\n")


def merge(parts: Iterable[str], path: str, before: TagPair | None = None) -> None:
    """Combine digest files ``parts`` into ``path``, sorted by (tag, port); removes them.
    ``before``: keep only the lines of tags (elapsed ns, microstep) before it (a run cut
    short at that tag); None keeps every line."""
    rows: list[tuple[int, int, str, str]] = []
    for p in parts:
        if not os.path.exists(p):  # a worker that wrote nothing (it was stopped)
            continue
        with open(p, encoding="utf-8") as f:
            for line in f:
                ts, ms, name, h = line.split()
                rows.append((int(ts), int(ms), name, h))
        os.unlink(p)
    if before is not None:
        rows = [r for r in rows if (r[0], r[1]) < before]
    rows.sort()
    with open(path, "w", encoding="utf-8") as f:
        for t, m, name, h in rows:
            f.write(f"{t} {m} {name} {h}\n")


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
        self.events: list[tuple[str, int, int]] = []  # (reaction, start ns, end ns)

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
            t0 = perf_counter_ns()
            try:
                fn(*args)
            finally:
                events.append((name, t0, perf_counter_ns()))

        return timed

    def json_events(self) -> list[dict[str, Any]]:
        return [
            {"name": n, "ph": "X", "pid": self.pid, "tid": 0, "ts": a / 1000, "dur": (b - a) / 1000}
            for n, a, b in self.events
        ]


def write_timeline(events: list[dict[str, Any]], path: str) -> None:
    """Write Chrome/Perfetto trace events to ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
