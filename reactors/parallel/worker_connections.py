"""A worker's connections to the rest of a run on several workers, as its backend gives them
(:class:`Link`): the control block, the bells, how it waits, its crossings in and out, and its
stdout channels.
Built by :func:`reactors.parallel.worker_main.worker_main`; used by
:class:`reactors.parallel.worker_scheduler.WorkerScheduler`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..core.port import Port
from .codec import Arrived
from .sync import BATCH_SEQ, SLEEP, Bell, Control, Idle, ring_if_waiting
from .transport import ChannelReader, ChannelWriter
from .worker_stdout import Captured


class Link:
    """What a worker needs from its backend: the control block ``ctl``, its index ``me``,
    ``bells[w]`` for every worker (worker 0's also wakes the coordinator) and ``bells[W]`` for
    the supervisor, the spin budget ``spin_ns``, ``idle(ready_fds)`` (called while blocked;
    may raise), the batches of crossings as ``incoming`` ``[(first rank here, [(position in
    the batch, reader)], batch cell, writer worker)]`` and the crossings as ``outgoing``
    ``[(last writing rank, writer, batch cell, position in the batch, reader workers)]``,
    ``output``: ``(Captured, (stdout port, (writer of even tags, writer of odd tags)))``, its
    reactions' stdout and how it is sent, ``free``: whether the run is free-running, and
    ``edge``: the cells of the batches exchanged only at the start and stop tags
    (:attr:`reactors.parallel.topology.Batch.edge`); ``steady_in`` and ``steady_out`` leave them
    out. ``skippers``: the workers but 0 that read no crossing but at the start and stop tags, so
    may skip the tags where they have nothing to run (a free-running run:
    :mod:`reactors.parallel.skipped_tags`). ``arrived``: the list where its readers leave the
    values they left in shared memory at the current tag (:func:`reactors.parallel.codec.settle`
    copies them out at its end)."""

    def __init__(
        self,
        ctl: Control,
        me: int,
        bells: Sequence[Bell],
        spin_ns: int,
        idle: Idle | None,
        incoming: Iterable[tuple[int, list[tuple[int, ChannelReader]], int, int]],
        outgoing: Iterable[tuple[int, ChannelWriter, int, int, tuple[int, ...]]],
        output: tuple[Captured, tuple[Port, tuple[ChannelWriter, ChannelWriter]]],
        free: bool = False,
        edge: Iterable[int] = (),
        skippers: Iterable[int] = (),
        arrived: list[Arrived] | None = None,
    ):
        self.ctl, self.me, self.bells = ctl, me, bells
        self.arrived: list[Arrived] = [] if arrived is None else arrived
        self.free = free
        self.spin_ns, self.idle = spin_ns, idle
        self.incoming = sorted(incoming, key=lambda x: x[0])
        self.outgoing = sorted(outgoing, key=lambda x: (x[0], x[2], x[3]))
        edge = set(edge)
        self.steady_in = [x for x in self.incoming if x[2] not in edge]
        self.steady_out = [x for x in self.outgoing if x[2] not in edge]
        self.captured, self.output = output
        self.skippers = tuple(skippers)
        # the workers that read crossings written here, with their first cell
        self.readers = [
            (w, ctl.worker_base(w)) for w in sorted({w for x in self.outgoing for w in x[4]})
        ]

    def publish(self, out: list, j: int, bound: int, seq: int, flush: bool) -> int:
        """Publish for tag number ``seq`` the crossings ``out[j:]`` (``outgoing`` or
        ``steady_out``) whose last writer rank is below ``bound``, each counted in its batch's
        cell; wake their sleeping readers; ``flush``: make them visible to other nodes now,
        not with the next sent cell. Returns the next index."""
        ctl = self.ctl
        cells = ctl.cells
        base = seq * BATCH_SEQ
        first, n = j, len(out)
        while j < n:
            last, writer, cell, pos, _ = out[j]
            if last >= bound:
                break
            writer.publish(seq)
            cells[cell] = base + pos
            j += 1
        if flush:
            ctl.flush()  # across nodes: the publications go in one send
        local = ctl.local_cells
        for w, at in self.readers:
            if local[at + SLEEP]:  # rare: a reader that waits long enough to sleep
                published = [x[2] for x in out[first:j] if w in x[4]]
                if published:
                    ring_if_waiting(local, at, self.bells[w], published)
        return j
