"""Recording a run's inputs from outside logical time, and replaying them exactly
(``--record FILE``, ``--replay FILE``).

A program's results depend on logical time only, except for what enters from outside it:

- the events of **physical actions** (scheduled by other threads, and the ``~>`` physical
  connections, which the compiler lowers to physical actions): recorded as the tag at which
  each event made the action present, with its value;
- **reads of physical time** inside reactions (``lf.time.physical()``,
  ``lf.time.physical_elapsed()``, and the runtime's deadline checks): recorded as the values
  each reactor's reactions read at each tag, in order (found from the caller's frame, at no
  cost to reactions that do not read);
- the **start time** (physical time when the run began) and the **final tag** (a timeout, a
  stop request from another thread, a signal): recorded once.

A replay re-runs the program with those inputs at the same tags and the same values: the
recorded start time, the recorded events pre-queued at their tags (calls to ``schedule()`` of
a physical action from other threads are ignored), each read of physical time answered with
the recorded value, and the recorded final tag as the stop tag. It never waits for the wall
clock (it runs as ``--fast``), so a recording that waited for physical events replays as fast
as the reactions run.

**Per-tag digests.** The recording also holds, for the tags it checks, a CRC-32 of every port
value present at their end (:func:`reactors.records.port_checksums.crc`). A replay compares each of
those tags as it ends and stops at the first that differs, naming the tag, the reactor, the port and
the value it now has (shortened): a replay after a code change shows where the new code first
departs from the recorded run. On several workers, each worker checks the ports it writes and
stops at its own first difference. Hashing every value of every tag costs a fixed time per
value (~0.5 µs); where the tags are that short (a program stepping 15 environments in 0.2 ms,
say), checking every one would slow the recorded run by a fifth. So a recorder checks a tag
only while its checks so far took at most :data:`CHECK_BUDGET` of the run's time: every tag of
a program whose tags take milliseconds, evenly spread tags of a faster one (the replay then
names the first checked tag that differs). ``--record-every-tag`` checks them all.

The file, written in chunks as the run goes, is described in :mod:`reactors.records.recording_file`.
"""

from __future__ import annotations

import pickle
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from time import perf_counter, time_ns
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..core.action import Action, PhysicalAction
from ..core.clock import Clock
from ..core.context import CTX
from ..core.engine import TagPair, Timing
from ..core.pending import current
from ..core.port import CHANNELS, Port
from ..core.reaction import Reaction
from ..model.arguments import to_pairs
from .port_checksums import sums_of
from .recording_file import (
    CHUNK,
    FLUSH_S,
    Recording,
    ReplayError,
    Writer,
    load,
    manifest,
    part_file,
)

if TYPE_CHECKING:
    from ..core.scheduler import Scheduler
    from ..model.program import Program

__all__ = ["ReplayError", "Recorder", "Replayer", "Tape", "load", "tape_for"]

#: How long a value may be when a divergence names it.
SHORT = 120
#: The share of a recorded run's time its per-tag checks may take (``--record-every-tag``:
#: no limit).
CHECK_BUDGET = 0.05


def shorten(value: Any, limit: int = SHORT) -> str:
    """``repr(value)`` on one line, cut to ``limit`` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reactor_of(port: str) -> str:
    """The full name of the reactor of a port's full name (``main.a.out[2]`` -> ``main.a``)."""
    return port.rsplit(".", 1)[0]


# --------------------------------------------------------------------------- the tape


class Tape:
    """What a scheduler consults while recording or replaying. Attach with :meth:`attach`.

    ``watch``: the names of the ports this scheduler checks at the end of each tag (None:
    every port, one worker). Reads of physical time are keyed by tag and reactor: the
    reactions of one reactor run one after the other in a fixed order on any worker count.
    """

    replaying = False

    def __init__(self, watch: Iterable[str] | None = None):
        self.watch = None if watch is None else frozenset(watch)
        self.thread: int | None = None
        # code objects of reaction bodies (False) and of the deadline checks (True)
        self.codes: dict[Any, bool] = {}
        self.sched: Scheduler | None = None
        self._now: Callable[[], int] = time_ns

    def attach(self, sched: Scheduler) -> None:
        """Make ``sched`` record into (or replay from) this tape: its clock's reads inside
        reactions go through :meth:`clock`, and its physical actions report the events they
        fire."""
        self.sched = sched
        self._now = sched.clock.now
        sched.clock = _TapeClock(sched.clock, self)
        sched.engine.tape = self
        codes = self.codes
        codes[Reaction.invoke.__code__] = True  # deadline checks
        codes[Reaction.check_deadline.__code__] = True
        for r in sched.program.reactions:
            for fn in (r.body, r.handler) if r is not None else ():
                code = getattr(getattr(fn, "__func__", fn), "__code__", None)
                if code is not None:
                    codes[code] = False

    def reader(self) -> str | None:
        """The full name of the reactor whose reaction is reading physical time (its body, a
        function it calls, or its deadline check), or None outside reactions."""
        f: FrameType | None = sys._getframe(2)
        codes = self.codes
        while f is not None:
            checks = codes.get(f.f_code)
            if checks is not None:
                obj = f.f_locals.get("self")
                return getattr(obj, "owner" if checks else "_lf_name", None)
            f = f.f_back
        return None

    def elapsed(self) -> TagPair:
        """The current tag as (elapsed ns, microstep)."""
        s = self.sched
        assert s is not None
        return s.time - s.start_time, s.micro

    # hooks the runtime calls
    def clock(self, reader: str) -> int:
        """Physical time (ns) read by a reaction of the reactor ``reader``."""
        raise NotImplementedError

    def begin(self, sched: Scheduler) -> None:
        """The run entered its start tag (the start time is known), on the scheduler's
        thread."""
        self.thread = threading.get_ident()

    def fired(self, action: Action, value: Any) -> None:
        """A physical action fired at the current tag with ``value``."""

    def tag_end(self, t: int, m: int, present: Iterable[Any]) -> None:
        """Tag ``(t elapsed ns, m)`` ended with ``present`` (ports and actions) present."""
        raise NotImplementedError

    def record(self, sched: Scheduler) -> None:
        """The current tag of ``sched`` ended (a worker's per-tag recorder interface)."""
        t, m = self.elapsed()
        self.tag_end(t, m, sched.present)

    def close(self, final: TagPair | None) -> None:
        """The run ended; ``final``: its last tag (elapsed ns, microstep) if it finished."""

    def _ports(self, present: Iterable[Any]) -> list[Port]:
        watch = self.watch
        return [
            p for p in present if p.__class__ in CHANNELS and (watch is None or p._name in watch)
        ]


class _TapeClock(Clock):
    """A scheduler's clock whose ``now()`` inside a reaction, on the scheduler's thread, is
    the tape's; waiting and waking are the real clock's."""

    __slots__ = ("real", "tape")

    def __init__(self, real: Clock, tape: Tape):  # no wake-up event of its own: real's
        self.real = real
        self.tape = tape

    def now(self) -> int:
        tape = self.tape
        if threading.get_ident() == tape.thread:
            reader = tape.reader()
            if reader is not None:
                return tape.clock(reader)
        return self.real.now()

    def wait_until(self, t: int) -> bool:
        return self.real.wait_until(t)

    def wait_for_wake(self) -> None:
        self.real.wait_for_wake()

    def wake(self) -> None:
        self.real.wake()


class Recorder(Tape):
    """Records into ``path`` (a part file on several workers, of the recording ``name``, the
    file the user named); ``manifest`` heads it. ``every_tag``: check every tag, not only as
    many as :data:`CHECK_BUDGET` allows.

    Raises:
        ReplayError: ``path`` cannot be written (the message names ``name``).
    """

    def __init__(
        self,
        path: str,
        head: dict,
        watch: Iterable[str] | None = None,
        every_tag: bool = False,
        name: str | None = None,
    ):
        super().__init__(watch)
        self.path = path
        self.head = head
        self.budget = None if every_tag else CHECK_BUDGET
        self.buf: list[tuple] = []
        self.flushed = self.since = perf_counter()
        self.spent = 0.0  # seconds spent checking tags
        self.t: int | None = None  # the latest tag ended (elapsed ns, microstep)
        self.m = 0
        self.keys: list = []  # the keys of the latest tag, and as a tuple
        self.key: tuple = ()
        self.file = Writer(path, name or path)  # open for the whole run, closed in close()

    def begin(self, sched: Scheduler) -> None:
        """At the start tag: write the manifest, with the start time, and the ports this
        recorder checks.

        Raises:
            ReplayError: it cannot be written.
        """
        super().begin(sched)
        self.file.head(dict(self.head, start_time=sched.start_time))
        self._add(("w", None if self.watch is None else tuple(sorted(self.watch))))
        self.since = perf_counter()

    def clock(self, reader: str) -> int:
        v = self._now()
        t, m = self.elapsed()
        self._add(("c", t, m, reader, v))
        return v

    def fired(self, action: Action, value: Any) -> None:
        """Record the event (its value must pickle: checked now, not when the chunk is
        written).

        Raises:
            ReplayError: the value cannot be pickled.
        """
        t, m = self.elapsed()
        try:
            pickle.dumps(value, protocol=5)
        except Exception as e:
            raise ReplayError(
                f"--record: the value of physical action {action._name} at tag {_tag(t, m)} "
                f"cannot be recorded: {type(e).__name__}: {e}"
            ) from None
        self._add(("a", t, m, action._name, value))

    def tag_end(self, t: int, m: int, present: Iterable[Any]) -> None:
        self.t, self.m = t, m
        if self.watch is not None and not self.watch:
            return  # a worker that writes no port checked here
        budget = self.budget
        if budget is not None:
            start = perf_counter()
            if self.spent > budget * (start - self.since):
                return  # over the budget: this tag goes unchecked
        keys, sums = sums_of(present, self.watch)
        if keys != self.keys:  # the same ports at most tags: one tuple, pickled once per chunk
            self.keys = keys
            self.key = tuple(keys)
        self._add(("d", t, m, self.key, sums))
        if budget is not None:
            self.spent += perf_counter() - start

    def _add(self, rec: tuple) -> None:
        buf = self.buf
        buf.append(rec)
        n = len(buf)
        if n >= CHUNK or (n % 64 == 0 and perf_counter() - self.flushed > FLUSH_S):
            self.flush()

    def flush(self) -> None:
        """Write the buffered records as one chunk, ending with the latest tag ended.

        Raises:
            ReplayError: it cannot be written (the file ends at its last whole chunk, and
                nothing more is written).
        """
        if self.buf and not self.file.broken:
            if self.t is not None:
                self.buf.append(("t", self.t, self.m))
            data = pickle.dumps(self.buf, protocol=5)
            self.buf = []
            self.file.chunk(data)
        self.flushed = perf_counter()

    def close(self, final: TagPair | None) -> None:
        """Write the last chunk (with the final tag if the run finished) and close the file.

        Raises:
            ReplayError: it cannot be written.
        """
        if self.file.fd < 0:
            return
        if final is not None:
            self.buf.append(("end", final[0], final[1]))
        try:
            self.flush()
        finally:
            self.file.close()


class Replayer(Tape):
    """Replays ``recording`` into a scheduler; ``place_end``: whether this scheduler keeps an
    event at the recorded final tag (one scheduler of a run does, so that the run idles to
    that tag as the recorded one did)."""

    replaying = True

    def __init__(
        self, recording: Recording, watch: Iterable[str] | None = None, place_end: bool = True
    ):
        super().__init__(watch)
        self.rec = recording
        self.place_end = place_end
        self.clocks = {k: deque(v) for k, v in recording.clocks.items()}
        self.checked = 0  # tags compared with the recording, of all tags ended
        self.tags = 0
        self.closed = False

    def begin(self, sched: Scheduler) -> None:
        """At the start tag: queue the recorded events of this scheduler's physical actions
        and, if ``place_end``, an event at the final tag.

        Raises:
            ReplayError: a recorded physical action is not in the program.
        """
        super().begin(sched)
        start = sched.start_time
        mine = {a._name: a for a in sched.program.actions if isinstance(a, PhysicalAction)}
        queue = sched.queue
        for name, events in self.rec.events.items():
            a = mine.get(name)
            if a is None:
                if self.watch is None:  # one scheduler holds every action
                    raise ReplayError(f"the recording has events of {name}, not in the program")
                continue
            for t, m, value in events:
                a._queue.append(queue.push(start + t, m, a, value))
        end = self.rec.stop
        if self.place_end and end is not None:
            marker = Action("replay end")
            marker._rq, marker._mark, marker._engine = sched.rq, _no_mark, sched.engine
            marker._queue.append(queue.push(start + end[0], end[1], marker, None))

    def clock(self, reader: str) -> int:
        t, m = self.elapsed()
        values = self.clocks.get((t, m, reader))
        if not values:
            raise ReplayError(
                f"replay departs from the recording at tag {_tag(t, m)}: reactor {reader} "
                "reads physical time more often than in the recorded run"
            )
        return values.popleft()

    def tag_end(self, t: int, m: int, present: Iterable[Any]) -> None:
        rec = self.rec
        self.tags += 1
        if rec.end is None and rec.last is not None and (t, m) >= rec.last:
            return  # the run recorded was cut short during its last tag
        if (t, m) not in rec.checked:
            return  # the recorded run did not check this tag
        cover = rec.checked[t, m]
        recorded = rec.digests.get((t, m), {})
        self.checked += 1
        watch = self.watch
        keys, sums = sums_of(present, watch)
        now = dict(zip(keys, sums))
        if cover is not None and (watch is None or not watch <= cover):
            now = {n: c for n, c in now.items() if n in cover}  # another worker's, unchecked
        if now == recorded or (
            watch is not None and now == {n: v for n, v in recorded.items() if n in watch}
        ):
            return
        ports = {p._name: p for p in self._ports(present)}
        for name in sorted(set(now) | {n for n in recorded if watch is None or n in watch}):
            if name not in now:
                self._departs(t, m, name, "absent now, present in the recorded run")
            value = shorten(current(ports[name]))
            if name not in recorded:
                self._departs(t, m, name, f"present now ({value}), absent in the recorded run")
            if now[name] != recorded[name]:
                self._departs(t, m, name, f"value now {value}, another in the recorded run")

    def close(self, final: TagPair | None) -> None:
        """Check that the replay ended where the recording did; the scheduler that keeps the
        final event says so on stderr.

        Raises:
            ReplayError: the replay finished at another tag.
        """
        stop = self.rec.stop
        if final is None or stop is None or self.closed:
            return
        self.closed = True
        if final != stop:
            raise ReplayError(
                f"replay departs from the recording: it ended at tag {_tag(*final)}, the "
                f"recorded run at {_tag(*stop)}"
            )
        if self.place_end:
            CTX.log.info(
                f"---- Replay matched the recording up to tag {_tag(*stop)} "
                f"({self.checked:,} of {self.tags:,} tags checked)"
            )

    def _departs(self, t: int, m: int, port: str, what: str) -> None:
        raise ReplayError(
            f"replay departs from the recording at tag {_tag(t, m)}: reactor "
            f"{reactor_of(port)}, port {port}: {what}"
        )


def _no_mark(_obj: Any) -> None:
    """The marker event's presence needs no clearing."""


def _tag(t: int, m: int) -> str:
    return f"({t:,} ns, {m})"


def replay_timing(timing: Timing, opts: Any) -> Timing:
    """``timing`` with the start time (ns since the epoch) and the stop tag (elapsed ns,
    microstep) of the recording that ``opts.replay`` names, as the launcher read them
    (``opts.replay_bounds``)."""
    assert opts.replay_bounds is not None  # set when the launcher read the recording
    start, stop = opts.replay_bounds
    return replace(timing, start_at=start, stop_at=stop)


def tape_for(
    sched: Scheduler, graph: Program, opts: Any, watch: list | None, me: int, workers: int
) -> Tape | None:
    """The recording (``opts.record``) or replay (``opts.replay``) of scheduler ``sched``, worker
    ``me`` of ``workers``, attached to it; ``watch``: the ports it writes (None: all). It
    checks those at the end of each tag, but the ports of the instances the compiler adds for
    ``after`` and ``~>`` (their values are those of ports already checked at an earlier tag).
    None when neither is asked for.

    Raises:
        ReplayError: the recording cannot be written or read.
    """
    added = {r.name for r in graph.reactors if r.synthetic is not None}
    ports = sched.program.ports if watch is None else watch
    names = [p._name for p in ports if reactor_of(p._name) not in added]
    tape: Tape
    if opts.record:
        path = opts.record if workers == 1 else part_file(opts.record, opts.run_id, me)
        head = manifest(graph, workers)
        head["arguments"] = to_pairs(opts.arguments)
        tape = Recorder(path, head, names, every_tag=opts.record_every_tag, name=opts.record)
    elif opts.replay:
        tape = Replayer(load(opts.replay, opts.trust), names, place_end=me == 0)
        sched.engine.timing = replay_timing(sched.engine.timing, opts)
    else:
        return None
    tape.attach(sched)
    return tape
