"""The actor side of ``--cluster ray`` (:mod:`reactors.cluster.ray_transport` is the supervisor's):
one worker of a run as a Ray actor (:class:`WorkerActor`), what it is sent (:class:`ActorSpec`),
where it landed (:class:`Placement`) and how it is woken (:class:`FifoBell`, FIFOs in
``/dev/shm``, since Ray's processes are not the supervisor's children). An actor takes the
supervisor's working directory, environment, ``sys.path`` and, on its host, its standard
output and error (the same open files, handed over a UNIX socket). When the run spans several
nodes, the first worker's actor on each node holds that node's copy of the run and its
receiver (:mod:`reactors.cluster.net`)."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..parallel.contention import CONTENTION
from ..parallel.plan import Plan
from ..parallel.processes import SPIN_NS, WorkerSpec, death_signal, run_worker
from ..parallel.shm import Segment, unlink_prefix
from ..parallel.sync import (
    ABORT,
    FINISHED,
    STATE,
    STATUS,
    W_FAILED,
    W_FINISHED,
    Aborted,
    Control,
    FdBell,
    Waker,
)
from ..parallel.transport import Idle
from .net import NetChannels, NetControl, NetPlan, node_prefix
from .wire import Link, NetError, Receiver

_EXIT_S = 60.0  # how long a node's copy waits for the run's workers to end
_ALIVE_S = 0.02  # how often an idle worker checks that the supervising process lives


class FifoBell(FdBell):
    """A bell that processes Ray started (not children of the supervisor) can share: a FIFO
    at ``path``, opened read-write and non-blocking by each side; a ring writes one byte (a
    full pipe is already rung), a wait polls it, a clear drains it."""

    def __init__(self, path: str, extra: Any = ()):
        super().__init__(os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC), extra)

    @staticmethod
    def make(path: str) -> str:
        """Create the FIFO ``path`` (mode 0600); returns it."""
        os.mkfifo(path, 0o600)
        return path

    def ring(self) -> None:
        try:
            os.write(self.fd, b"\1")
        except BlockingIOError:
            pass

    def clear(self) -> None:
        try:
            while len(os.read(self.fd, 4096)) == 4096:  # less: the FIFO is empty now
                pass
        except BlockingIOError:
            pass


class NullBell:
    """The bell of a waiter on another node: ringing it does nothing (that node's receiver
    rings its sleepers, :class:`reactors.cluster.wire.Receiver`)."""

    def ring(self) -> None:
        pass


def bell_path(prefix: str, w: int) -> str:
    """The FIFO of worker ``w``'s bell (``w`` = the worker count: the supervisor's) on the
    node whose segment prefix is ``prefix``."""
    return f"/dev/shm/{prefix}bell{w}"


@dataclass(frozen=True)
class ActorSpec(WorkerSpec):
    """What a worker actor needs (sent with its call): also the bells (FIFO paths, one per
    worker then the supervisor's), the supervisor's working directory, environment and
    ``sys.path``, whether the actor runs on the supervisor's host (``same_host``) and, when
    the run spans several nodes, where they are (``net``)."""

    bells: tuple[str, ...]
    cwd: str
    env: dict[str, str]
    sys_path: tuple[str, ...]
    same_host: bool = True
    net: NetPlan | None = None


@dataclass(frozen=True)
class Placement:
    """Where Ray placed one worker: its node id, the node's address, host name, the
    actor's process id and that of its parent (the node's raylet, which starts the node's
    workers); ``shares_memory``: whether it sees the run's control segment."""

    node_id: str
    address: str
    host: str
    pid: int
    raylet: int
    shares_memory: bool

    def describe(self) -> str:
        return f"Ray node {self.node_id[:12]} ({self.address}, host {self.host})"


class ReceiverProcess:
    """A node's :class:`reactors.cluster.wire.Receiver` in a process of its own, forked from the
    actor that holds the node's copy. Its threads then
    never wait for the worker's interpreter lock, so the node's workers may poll for what
    arrives (as they do on one machine) instead of sleeping until the receiver rings them:
    a sleeping core takes long to wake on a virtual machine. The process ends when
    :meth:`close` is called or the actor dies (``PR_SET_PDEATHSIG``). The arguments are
    those of :class:`reactors.cluster.wire.Receiver`; ``address`` is the receiver's ``(host,
    port)``.
    Raises NetError when the receiver could not start."""

    def __init__(
        self,
        ctl: Control,
        prefix: str,
        host: str,
        secret: bytes,
        local: Sequence[int],
        bells: Mapping[int, Waker],
        supervisor_bell: Waker | None = None,
    ):
        stop_r, self.stop = os.pipe()
        port_r, port_w = os.pipe()
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:  # the receiver's process: only the receiver's code runs here
            try:
                os.close(self.stop)
                os.close(port_r)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                death_signal(signal.SIGTERM)  # actor tasks run on the actor's main thread
                if os.getppid() != parent:
                    return
                receiver = Receiver(ctl, prefix, host, secret, local, bells, supervisor_bell)
                os.write(port_w, str(receiver.address[1]).encode())
                os.close(port_w)
                os.read(stop_r, 1)  # until the actor closes its end (or dies)
                receiver.close()
            finally:
                os._exit(0)
        os.close(stop_r)
        os.close(port_w)
        with os.fdopen(port_r, "rb") as f:
            port = f.read()
        if not port:
            self.close()
            raise NetError("the node's receiver process could not start")
        self.address: tuple[str, int] = (host, int(port))

    def close(self) -> None:
        """End the receiver (it closes its connections) and reap its process."""
        os.close(self.stop)
        end = time.monotonic() + _EXIT_S
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > end:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.005)


class WorkerActor:
    """One worker of a run, as a Ray actor (made remote by :class:`RayTransport`);
    ``receiver``: its node's, when :meth:`serve` made this actor hold the node's copy."""

    receiver: ReceiverProcess | None = None

    def where(self, prefix: str) -> Placement:
        """Where this actor runs, and whether it sees the segment ``prefix + "ctl"``."""
        import ray

        ctx = ray.get_runtime_context()
        return Placement(
            ctx.get_node_id(),
            ray.util.get_node_ip_address(),
            os.uname().nodename,
            os.getpid(),
            os.getppid(),
            os.path.exists(f"/dev/shm/{prefix}ctl"),
        )

    def serve(
        self,
        plan: Plan,
        prefix: str,
        node: int,
        local: tuple[int, ...],
        secret: bytes,
        bells: tuple[str, ...] = (),
    ) -> tuple[str, int]:
        """Hold node ``node``'s copy of the run whose segment prefix is ``prefix`` (this actor
        runs the first of the node's workers ``local``): its control block, its workers'
        bells and the receiver of what the other nodes send. Node 0's copy is the
        supervisor's own, with its bells ``bells`` (one per worker, then the supervisor's);
        the other nodes' are made here. Returns the receiver's address."""
        import ray

        here = node_prefix(prefix, node)
        n = plan.workers
        size = Control.size(n, plan.channels, len(plan.batches))
        seg = Segment(here + "ctl") if node == 0 else Segment(here + "ctl", True, size)
        ctl = Control(seg.buf, n, plan.channels, len(plan.batches))  # type: ignore[arg-type]  # open
        self.node, self.node_ctl, self.node_seg, self.node_prefix = node, ctl, seg, here
        if node == 0:
            self.node_bells = {w: FifoBell(bells[w]) for w in local}
            self.supervisor_bell: FifoBell | None = FifoBell(bells[-1])
        else:
            self.node_bells = {w: FifoBell(FifoBell.make(bell_path(here, w))) for w in local}
            self.supervisor_bell = None
        host = ray.util.get_node_ip_address()
        self.receiver = ReceiverProcess(
            ctl, here, host, secret, local, self.node_bells, self.supervisor_bell
        )
        return self.receiver.address

    def run(self, spec: ActorSpec) -> tuple[int, int]:
        """Be worker ``spec.me`` until the run ends; its exit status and the bytes it sent
        to other nodes."""
        ray_fds = _adopt(spec)
        links: list[Link] = []
        net = spec.net
        if net is None:
            bells: list[Any] = [FifoBell(p) for p in spec.bells]
            attach = None
        else:
            node = net.node_of[spec.me]
            here = node_prefix(spec.prefix, node)
            n = len(net.node_of)
            bells = [
                FifoBell(bell_path(here, w)) if net.node_of[w] == node else NullBell()
                for w in range(n)
            ]
            bells.append(FifoBell(spec.bells[-1]) if node == 0 else NullBell())
            host = net.addresses[node][0]
            CONTENTION.elsewhere = sum(  # this run's workers on other nodes of this host
                net.addresses[k][0] == host and k != node for k in net.node_of
            )

            def attach(spec: ActorSpec) -> tuple[Control, NetChannels, int]:
                seg = Segment(here + "ctl")
                peers = {k: a for k, a in enumerate(net.addresses) if k != node}
                link = Link(peers, net.secret, spec.me)
                links.append(link)
                plan = spec.plan
                ctl = NetControl(
                    seg.buf, plan.workers, plan.channels, len(plan.batches), link, node
                )
                ctl.segment = seg  # mapped while the block lives
                return ctl, NetChannels(ctl, here, spec.me, net), SPIN_NS

        ran = run_worker(spec, bells, lambda ctl: _idle(ctl, spec), attach)
        for b in bells:
            if isinstance(b, FifoBell):
                os.close(b.fd)
        if self.receiver is not None:
            self._release_node()
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), ray_fds):  # Ray's own noise when it ends the actor: its log
            os.dup2(saved, fd)
            os.close(saved)
        return (1 if ran is None else ran[0]), sum(link.sent_bytes for link in links)

    def _release_node(self) -> None:
        """Once the run finished and every worker ended (or the run was aborted), close the
        receiver and, on a node other than the supervisor's, unlink the node's copy of the
        run. (Worker 0 of a free-running run writes ``FINISHED`` after its own status.)"""
        ctl = self.node_ctl
        cells = ctl.cells
        end = time.monotonic() + _EXIT_S
        while time.monotonic() < end and cells[STATE] != ABORT:
            if cells[STATE] == FINISHED and all(
                cells[ctl.worker_base(w) + STATUS] in (W_FAILED, W_FINISHED)
                for w in range(ctl.workers)
            ):
                break
            time.sleep(0.01)
        assert self.receiver is not None
        self.receiver.close()
        self.receiver = None
        for b in [*self.node_bells.values(), self.supervisor_bell]:
            if b is not None:
                os.close(b.fd)
        ctl.release()
        try:
            self.node_seg.close()
        except BufferError:
            pass
        if self.node != 0:
            unlink_prefix(self.node_prefix)


def _adopt(spec: ActorSpec) -> tuple[int, int]:
    """Take the supervisor's working directory, environment, module path and, on its host,
    its standard output and error (:func:`_take_output`); leave SIGINT and SIGHUP to it.
    Returns copies of the actor's own standard output and error descriptors (Ray's log)."""
    saved = (os.dup(1), os.dup(2))
    try:
        os.chdir(spec.cwd)
    except OSError:  # another host without that folder: stay in Ray's
        pass
    os.environ.update(spec.env)
    sys.path[:0] = [p for p in spec.sys_path if p not in sys.path]
    if spec.same_host:
        _take_output(spec)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115  # fd 1 outlives it
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    for sig in (signal.SIGINT, signal.SIGHUP):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except ValueError:  # not the actor's main thread: Ray keeps its own handlers
            pass
    return saved


def output_socket(prefix: str) -> str:
    """The UNIX socket where the supervisor of the run ``prefix`` hands out its standard
    output and error descriptors."""
    return f"/dev/shm/{prefix}out"


def _take_output(spec: ActorSpec) -> None:
    """Make this process's descriptors 1 and 2 the supervisor's open files (received over
    :func:`output_socket`; if that fails, the same files reopened through ``/proc``, which
    keep their own offset; if that fails too, Ray's log files)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(output_socket(spec.prefix))
            _, fds, _, _ = socket.recv_fds(sock, 1, 2)
    except OSError:
        fds = []
    if len(fds) != 2:
        fds = []
        for fd in (1, 2):
            try:
                fds.append(os.open(f"/proc/{spec.parent}/fd/{fd}", os.O_WRONLY | os.O_APPEND))
            except OSError:  # closed there: keep Ray's log file
                fds.append(-1)
    for fd, got in zip((1, 2), fds):
        if got >= 0:
            os.dup2(got, fd)
            os.close(got)


def _idle(ctl: Control, spec: ActorSpec) -> Idle:
    """An actor's idle check: stop on an abort, or when the supervising process died (then
    unlink the run's segments, since nobody else will); the latter, a read of ``/proc``, at
    most every :data:`_ALIVE_S` seconds (a waiter's wakes that find nothing new are many)."""
    checked = 0.0

    def idle(_ready: list[int]) -> None:
        nonlocal checked
        if ctl.cells[STATE] == ABORT:
            raise Aborted()
        if spec.same_host and time.monotonic() - checked >= _ALIVE_S:
            checked = time.monotonic()
            if not alive(spec.parent):
                unlink_prefix(spec.prefix)
                raise Aborted()

    return idle


def alive(pid: int) -> bool:
    """Whether process ``pid`` (of this host) lives and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


__all__ = [
    "ActorSpec",
    "FifoBell",
    "NullBell",
    "Placement",
    "WorkerActor",
    "alive",
    "bell_path",
    "output_socket",
]
