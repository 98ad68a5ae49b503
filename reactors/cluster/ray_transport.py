"""The Ray transport (``--cluster ray[=ADDRESS]``): the workers of a run become actors of a
running Ray cluster, which places and starts them, and tells when one dies.

Ray does the cluster's work: a placement group of one bundle (1 CPU) per worker, spread over
the cluster's nodes (strategy ``SPREAD``), one actor per bundle, and the actors' deaths. The
run itself is that of the processes transport (:mod:`reactors.parallel.processes`): the same worker
life (:func:`reactors.parallel.processes.run_worker`); the workers on the supervisor's node share
its control segment and channel segments in ``/dev/shm``; when the workers span several nodes,
each other node gets its own copy, kept by the network transport (:mod:`reactors.cluster.net`): the
first worker's actor on each node receives what the other nodes send (on the supervisor's
node with no worker, the supervisor does), and each process sends its own writes.

``@node("label")`` on an instantiation asks for a node that has the custom resource ``label``
(``ray start --resources '{"label": 1}'``) for the worker of that reactor and of the reactors
inside it.

What differs from spawned processes: the bells are FIFOs in ``/dev/shm`` (named with the run's
prefix, so unlinked with its segments) instead of inherited eventfds; an actor takes the
supervisor's working directory, environment, ``sys.path`` and, on its host, its standard output
and error (the same open files, handed over a UNIX socket), so a reaction prints and writes
files as on one machine; a dead actor is
noticed from its process or its node's raylet (on the supervisor's host: at its next wake-up,
within 50 ms) or from Ray (``ray.wait`` on its call), and the supervisor names the worker, its
node and its reactors; a worker whose supervisor died (on another host: whose connection
closed) stops, and the run's segments there are unlinked. At the end every actor is killed
and the placement group removed; the driver leaves the cluster (which keeps running). Ray is
imported only by this module, so only with ``--cluster``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
from types import ModuleType
from typing import Any

from ..core.errors import ClusterError
from ..core.log import Log
from ..model.program import ClusterRun, NodePlacement, Program
from ..model.target import DEFAULTS
from ..parallel.costs import GRAPH_FILE, record
from ..parallel.plan import Plan
from ..parallel.processes import ProcessTransport
from ..parallel.sync import (
    STATUS,
    W_FAILED,
    W_FINISHED,
    W_GONE,
)
from ..parallel.transport import Bell, Idle, WorkerDied
from .net import NetCells, NetPlan, cell_policy, node_prefix, snapshot
from .ray_actor import ActorSpec, FifoBell, Placement, WorkerActor, alive, bell_path, output_socket
from .wire import SUPERVISOR, Link, NetError, Receiver, new_secret

_PLACE_S = 30.0  # how long the cluster gets to find room for the workers
_START_S = 120.0  # how long the actors get to start (a fresh Ray worker imports numpy...)
_EXIT_S = 60.0  # how long finished workers get to write their records
_GRACE_S = 2.0  # how long stopped workers get before they are killed
_LABEL_SHARE = 0.001  # how much of a @node label's resource one worker takes


def node_labels(graph: Program, plan: Plan) -> list[tuple[str, ...]]:
    """The ``@node("label")`` labels that each worker's node must have (as Ray resources):
    those of its reactors, a reactor without its own taking its nearest container's."""
    reactors = graph.reactors
    own: list[str | None] = []
    for inst in reactors:  # parents come before children
        inherited = own[inst.parent] if inst.parent is not None else None
        own.append(inst.node or inherited)
    return [
        tuple(sorted({label for rid in plan.owned[w] if (label := own[rid]) is not None}))
        for w in range(plan.workers)
    ]


def _check_labels(labels: list[tuple[str, ...]], resources: dict, graph: Program) -> None:
    """Raise ClusterError naming a reactor whose ``@node`` or ``at`` asks for a Ray resource
    that no node of the cluster has."""
    for label in sorted({x for ls in labels for x in ls}):
        if label not in resources:
            who = next(r.name for r in graph.reactors if r.node == label)
            hint = (
                "a node on that host"
                if label.startswith("node:")
                else f"a node with `ray start ... --resources '{{\"{label}\": 1}}'`"
            )
            raise ClusterError(
                f"{who} needs a node with the Ray resource '{label}' (its @node or 'at'), "
                f"which no node of the cluster has; start {hint}"
            )


def connect(address: str) -> Any:
    """Join the Ray cluster at ``address`` (``auto``: the one running on this machine) as a
    driver, quietly; the ``ray`` module. Raises ClusterError when none is there."""
    try:
        import ray
    except ImportError as e:
        raise ClusterError(
            "--cluster ray needs Ray: install it with `pip install -e '.[cluster]'`"
        ) from e
    if not ray.is_initialized():
        where = "on this machine" if address == "auto" else f"at {address}"
        start = (
            "start one with `ray start --head` (and `ray start --address HEAD:6379` on each "
            "other node)"
        )
        if address != "auto":  # ray.init would retry an unreachable address for minutes
            host, _, port = address.rpartition(":")
            try:
                socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
            except (OSError, ValueError) as e:
                raise ClusterError(f"no Ray cluster answers {where} ({e}); {start}") from e
        try:
            ray.init(
                address=address,
                logging_level=logging.ERROR,
                log_to_driver=False,
                configure_logging=True,
            )
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ClusterError(f"no Ray cluster is running {where} ({e}); {start}") from e
    return ray


class RayTransport(ProcessTransport):
    """The :class:`reactors.parallel.transport.Transport` whose workers are actors of the Ray
    cluster at ``address``; made by ``RayTransport(plan, address=...)``. Raises ClusterError
    (from the constructor or :meth:`start`) when the cluster cannot run the workers."""

    def __init__(self, plan: Plan, address: str = "auto"):
        self.ray = connect(address)
        super().__init__(plan)
        self.placements: list[Placement] = []
        self.actors: list[Any] = []
        self.calls: list[Any] = []
        self.group: Any = None
        self.dead: dict[int, str] = {}
        self._watching = threading.Event()
        self._watcher: threading.Thread | None = None
        self.receiver: Receiver | None = None
        self.link: Link | None = None
        self.output_server: socket.socket | None = None
        self.graph_file = ""
        self.nodes: tuple[NodePlacement, ...] = ()

    def _bells(self, n: int) -> list[int]:
        """One FIFO per worker and one for the supervisor, in ``/dev/shm`` with the run's
        prefix (unlinked with its segments); their descriptors."""
        self.bell_paths = tuple(FifoBell.make(bell_path(self.prefix, w)) for w in range(n + 1))
        self.bells = [FifoBell(p) for p in self.bell_paths]  # closed with ``fds``
        return [b.fd for b in self.bells]

    def _serve_output(self) -> None:
        """Hand this process's standard output and error descriptors to each actor of this
        host that asks (a UNIX socket in ``/dev/shm`` with the run's prefix, SCM_RIGHTS): the
        same open files, so their writes and this process's share one file offset."""
        path = output_socket(self.prefix)  # unlinked with the run's segments
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        os.chmod(path, 0o600)
        server.listen(self.plan.workers)
        self.output_server = server

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:  # closed at the end of the run
                    return
                with conn:
                    with contextlib.suppress(OSError):
                        socket.send_fds(conn, [b"\1"], [1, 2])

        threading.Thread(target=serve, daemon=True, name="lf-output").start()

    def start(self, module: ModuleType, graph: Program, opts: Any, log: Log) -> None:
        """Place one actor per worker (a placement group spread over the nodes), check that
        each shares memory with this process, then start each worker's life."""
        ray = self.ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        n = self.plan.workers
        self._serve_output()
        labels = node_labels(graph, self.plan)
        _check_labels(labels, ray.cluster_resources(), graph)
        bundles = [{"CPU": 1.0, **{label: _LABEL_SHARE for label in ls}} for ls in labels]
        self.group = placement_group(bundles, strategy="SPREAD")
        try:
            ray.get(self.group.ready(), timeout=_PLACE_S)
        except ray.exceptions.GetTimeoutError as e:
            free = ray.available_resources().get("CPU", 0)
            wanted = " with their @node labels" if any(labels) else ""
            raise ClusterError(
                f"the Ray cluster has no room for {n} workers of 1 CPU each{wanted} within "
                f"{_PLACE_S:.0f} s ({free:g} CPUs free); add nodes or run fewer workers (-w)"
            ) from e
        remote = ray.remote(num_cpus=1, max_restarts=0)(WorkerActor)
        self.actors = [
            remote.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(self.group, w),
                name=f"lf-worker-{w}-{self.prefix}",
            ).remote()
            for w in range(n)
        ]
        try:
            self.placements = ray.get(
                [a.where.remote(self.prefix) for a in self.actors], timeout=_START_S
            )
        except ray.exceptions.RayError as e:
            raise ClusterError(f"the Ray cluster could not start the workers: {e}") from e
        driver = ray.get_runtime_context().get_node_id()
        nodes = [driver, *sorted({p.node_id for p in self.placements} - {driver})]
        node_of = tuple(nodes.index(p.node_id) for p in self.placements)
        for w, p in enumerate(self.placements):
            if opts.verbose:
                how = "shared memory" if node_of[w] == 0 else f"network, node copy {node_of[w]}"
                log.info(f"---- Worker {w} on {p.describe()}, process {p.pid} ({how})")
        net = self._network(node_of) if len(nodes) > 1 else None
        path = os.path.abspath(module.__file__ or "")
        self.graph_file = os.path.join(os.path.dirname(path), GRAPH_FILE)
        self.nodes = tuple(NodePlacement(p.node_id, p.address, p.host) for p in self.placements)
        record(self.graph_file, "cluster_run", ClusterRun(self.nodes, self.plan.placement))
        level = graph.target.logging or DEFAULTS.logging
        env = dict(os.environ)
        for w, actor in enumerate(self.actors):
            spec = ActorSpec(
                path,
                module.__name__,
                graph,
                self.plan,
                w,
                self.prefix,
                opts,
                level,
                os.getpid(),
                self.bell_paths,
                os.getcwd(),
                env,
                tuple(sys.path),
                self.placements[w].shares_memory,
                net,
            )
            self.calls.append(actor.run.remote(spec))
        self._watcher = threading.Thread(target=self._watch_calls, daemon=True)
        self._watcher.start()

    def _network(self, node_of: tuple[int, ...]) -> NetPlan:
        """Join the nodes of a run that spans several (``node_of[w]``: worker ``w``'s, 0 this
        process's): on each node a receiver in the actor of its first worker (here: in this
        process when no worker is on this node) and, on the other nodes, a copy of the run;
        this process's link to them, which sends them the control block as it is now; from
        here on the supervisor's writes of cells go to every node."""
        ray = self.ray
        secret = new_secret()
        n = self.plan.workers
        k = max(node_of) + 1
        local = [tuple(w for w in range(n) if node_of[w] == i) for i in range(k)]
        try:
            if local[0]:  # the first worker here receives: one process less on each hop
                first = self.actors[local[0][0]]
                here = first.serve.remote(
                    self.plan, self.prefix, 0, local[0], secret, self.bell_paths
                )
            else:
                host = ray.util.get_node_ip_address()
                self.receiver = Receiver(
                    self.control, self.prefix, host, secret, (), {}, self.bells[-1]
                )
            served = ray.get(
                [
                    self.actors[local[i][0]].serve.remote(
                        self.plan, self.prefix, i, local[i], secret
                    )
                    for i in range(1, k)
                ],
                timeout=_START_S,
            )
            addresses = (
                self.receiver.address if self.receiver else ray.get(here, timeout=_START_S),
                *served,
            )
            self.link = Link({i: addresses[i] for i in range(1, k)}, secret, SUPERVISOR)
            snapshot(self.link, self.control)
        except (ray.exceptions.RayError, NetError) as e:
            raise ClusterError(f"the nodes of the run could not reach each other: {e}") from e
        self.control.cells = NetCells(self.control.cells, cell_policy(self.control), self.link)  # type: ignore[assignment]
        prefixes = tuple(node_prefix(self.prefix, i) for i in range(k))
        return NetPlan(node_of, prefixes, tuple(addresses), secret)

    def _watch_calls(self) -> None:
        """Note each worker whose call failed (its actor or node died) and ring the
        supervisor's bell."""
        ray = self.ray
        pending = {c: w for w, c in enumerate(self.calls)}
        bell = FifoBell(self.bell_paths[-1])
        try:
            while pending and not self._watching.is_set():
                done, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
                for ref in done:
                    w = pending.pop(ref)
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayError as e:
                        self.dead[w] = str(e).strip().splitlines()[0]
                        bell.ring()
        except Exception:  # the driver left the cluster: the supervisor is ending the run
            pass
        finally:
            os.close(bell.fd)

    def watch(self) -> tuple[Bell, Idle]:
        """The supervisor's FIFO; the idle check raises WorkerDied for a worker whose
        process ended, or whose call Ray reports failed, before it finished or reported."""
        return self.bells[-1], lambda ready: self._check_actors()

    def _check_actors(self) -> None:
        ctl = self.control
        for w, p in enumerate(self.placements):
            status = ctl.cells[ctl.worker_base(w) + STATUS]
            if status in (W_FAILED, W_FINISHED):
                continue
            why = self.dead.get(w)
            if why is None and p.shares_memory and not alive(p.raylet):  # its node went
                why = "its node's raylet ended"
            if why is None and p.shares_memory and not alive(p.pid):
                why = "its process ended"
            if why is None and status == W_GONE:  # told by the network transport
                why = "its connection to the other nodes closed"
            if why:
                raise WorkerDied(f"worker {w} on {p.describe()} died: {why}", w)

    def worker_bells(self) -> list[FifoBell]:  # type: ignore[override]
        return self.bells[:-1]

    def join(self) -> None:
        """Wait for the workers' calls; record in graph.json what each sent to other nodes."""
        ray = self.ray
        done, _ = ray.wait(self.calls, num_returns=len(self.calls), timeout=_EXIT_S)
        if self.link is not None and len(done) == len(self.calls):
            try:
                sent = tuple(int(r[1]) for r in ray.get(self.calls, timeout=5))
            except ray.exceptions.RayError:
                return
            run = ClusterRun(self.nodes, self.plan.placement, sent)
            record(self.graph_file, "cluster_run", run)

    def shutdown(self, grace_s: float | None = None) -> None:
        """Wait for the workers' calls for the grace period (``grace_s`` seconds, default
        2), then kill every actor and remove the placement group."""
        ray = self.ray
        self._watching.set()
        # the calls of the workers still alive (a dead node's are answered only when Ray
        # notices, seconds later)
        live = [
            c
            for c, p in zip(self.calls, self.placements)
            if not p.shares_memory or alive(p.pid) and alive(p.raylet)
        ]
        if live:
            grace = _GRACE_S if grace_s is None else grace_s
            ray.wait(live, num_returns=len(live), timeout=grace)
        for a in self.actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # already gone with its node
                pass
        if self.group is not None:
            try:
                ray.util.remove_placement_group(self.group)
            except Exception:  # the cluster went away
                pass
        # the processes end a moment after Ray is told; the segments are unlinked after it
        end = time.monotonic() + 2.0
        while (
            any(p.shares_memory and alive(p.pid) for p in self.placements)
            and time.monotonic() < end
        ):
            time.sleep(0.01)
        if self._watcher is not None:
            self._watcher.join(1.0)

    def close(self) -> None:
        """Stop the receiver, unlink the run's segments and FIFOs (on this host: those of
        every node's copy too), close the bells, leave the cluster."""
        if self.receiver is not None:
            self.receiver.close()
        if self.link is not None:
            self.link.close()
        if self.output_server is not None:
            with contextlib.suppress(OSError):
                self.output_server.shutdown(socket.SHUT_RDWR)
            self.output_server.close()
        super().close()
        if self.ray.is_initialized():
            self.ray.shutdown()


__all__ = ["RayTransport", "connect", "node_labels"]
