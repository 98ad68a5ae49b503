"""What a backend provides to a parallel run: the interface every transport implements.

A run on W > 1 workers is planned (:mod:`reactors.parallel.plan`), supervised
(:mod:`reactors.parallel.supervisor`) and lived by each worker
(:mod:`reactors.parallel.worker_main`); only how workers are started and how they reach each other
depends on the backend. That part is a
:class:`Transport`:

- the control block (:class:`reactors.parallel.sync.Control`) that the coordinator and the workers
  share,
  and the bells that wake them (:class:`Bell`: ``bells[w]`` for worker ``w``, ``bells[W]``
  for the supervisor);
- the channels' writers and readers (:class:`Channels`: one worker's ends, numbered as in
  :class:`reactors.parallel.plan.Plan`);
- starting one worker per planned worker, watching them (a dead worker raises
  :class:`WorkerDied`), joining them, and closing and unlinking what the run allocated.

Implemented by :mod:`reactors.parallel.processes` (spawned processes, shared memory, eventfds) and
:mod:`reactors.parallel.threads` (threads of the program's process, values by reference, events).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from ..core.log import Log
from ..model.program import Program
from .sync import Bell, Control, Idle, Waker


class WorkerDied(Exception):
    """A worker ended without reporting (killed by a signal, or crashed); ``worker`` is its
    index."""

    def __init__(self, message: str, worker: int):
        super().__init__(message)
        self.worker = worker


class ChannelWriter(Protocol):
    """The writing side of one channel, in its writer worker."""

    def publish(self, seq: int) -> None:
        """Publish the port's value and presence for tag number ``seq`` (>= 0)."""


class ChannelReader(Protocol):
    """The reading side of one channel, in one reader worker. ``state_cell`` is the control
    cell the writer publishes last (``2 * seq + present``; wait until it is >= ``2 * seq``)."""

    state_cell: int

    def receive(self, seq: int) -> None:
        """Read tag ``seq``'s record (already published); if present, set the port's value
        and trigger it."""


class Channels(Protocol):
    """One worker's ends of the run's channels (numbered as in
    :class:`reactors.parallel.plan.Plan`). ``port`` is the local root port (or a worker's
    :func:`reactors.parallel.worker_stdout.stdout_port`). ``arrived``: the values its readers
    left in shared memory at the current tag (:class:`reactors.parallel.codec.Arrived`), which
    the worker settles (:func:`reactors.parallel.codec.settle`) before it completes the tag."""

    arrived: list[Any]

    def writer(self, index: int, readers: tuple[int, ...], port: Any) -> ChannelWriter:
        """The writer of channel ``index``, read by workers ``readers``."""

    def reader(self, index: int, port: Any) -> ChannelReader:
        """A reader of channel ``index``."""

    def started(self, me: int, sched: Any) -> None:
        """Worker ``me`` built its :class:`reactors.parallel.worker_scheduler.WorkerScheduler`
        ``sched`` (it serves the reactions' ``lf.tag()``, ``request_stop()``... from here on)."""

    def close(self) -> None:
        """Release this worker's ends (the worker is leaving)."""


@dataclass(frozen=True)
class Endpoint:
    """What a worker gets from its transport: the control block, the bells (one per worker,
    then the supervisor's), its channel ends, the spin budget of a wait (ns) and the idle
    check of its waits (None: none)."""

    ctl: Control
    bells: Sequence[Bell]
    channels: Channels
    spin_ns: int
    idle: Idle | None


class Transport(Protocol):
    """A backend for one run of a :class:`reactors.parallel.plan.Plan` (made by ``Backend(plan)``,
    which allocates the control block and the bells). The supervisor calls, in order:
    :meth:`start`, :meth:`watch`, then :meth:`join` after a normal end; and on every exit
    path :meth:`worker_bells` (to stop the workers), :meth:`shutdown`, :meth:`channels` (to
    print pending output) and :meth:`close`."""

    control: Control

    def start(self, module: ModuleType, graph: Program, opts: Any, log: Log) -> None:
        """Start one worker per planned worker, each running
        :func:`reactors.parallel.worker_main.worker_main` (``opts``: the launcher's options)."""

    def watch(self) -> tuple[Bell, Idle | None]:
        """The supervisor's bell and the idle check that raises :class:`WorkerDied`."""

    def worker_bells(self) -> Sequence[Waker]:
        """What rings each worker's bell (to tell them to stop)."""

    def join(self) -> None:
        """After a normal end: wait for the workers to write their records and exit."""

    def shutdown(self, grace_s: float | None = None) -> None:
        """After the workers were told to stop: join them, forcing those that do not exit
        within a grace period (``grace_s`` seconds; None: the transport's own); restore what
        :meth:`start` replaced in this process."""

    def channels(self) -> Channels:
        """The supervisor's ends of the channels (it reads the workers' stdout channels)."""

    def close(self) -> None:
        """Release and unlink everything the run allocated (no error if already gone)."""
