"""Checkpoints of a whole program (``--checkpoint-every``, ``--checkpoint-every-tags``) and
resuming from one (``--resume``).

**When.** After a tag completes (not the last one, nor one after a signal asked the run to
stop: its reactions may have cut their work short): with ``--checkpoint-every-tags N``, after
every N-th tag of the run (counted from the start tag, resumed runs included); with
``--checkpoint-every N UNIT``, after the first tag at or past each multiple of that logical
time since the start. What a snapshot holds is described in :mod:`reactors.snapshot`.

**The program's own policy.** When the command line asks for no checkpoints, a main reactor
may give the policy itself (``lf_checkpoint_policy``, see :mod:`reactors.checkpoint_policy`).

**Where.** ``<dir>/<program>.<tags:012d>.lfsnap`` (``tags``: how many tags had completed), the
last K kept (``--checkpoint-keep``). A file (:mod:`reactors.snapshot_file`) is ``MAGIC``, one
line of JSON (the manifest: program, graph hash and the hash of each reactor, tag, tag count,
stop tag, the main-reactor arguments of the command line, versions), then the parts, each an
8-byte big-endian length and a pickle (one part per worker; a part keeps each reactor's state
as its own pickle, so a worker unpickles only the reactors it runs). Files are written to a temporary name, fsynced and
renamed. On several workers, each worker writes its part beside the directory at the same tag,
before it reports the tag done; worker 0 joins the parts into one file once every worker
reported.

**Resume.** ``--resume PATH`` (a snapshot; a directory: its newest; a directory without
snapshots but with a ``checkpoints`` folder, such as an RL run directory: the newest there)
builds the program as usual, checks that the snapshot is of this program and of the same graph
(else refuses with what differs), takes the main-reactor arguments of the run it continues
(those given again on the command line win), then starts at the snapshot's tag, already run: no
startup reaction runs, the state and pending events are restored, and the next tag follows by
the usual rules. A fast run keeps the start time of the run it continues; a run that waits for
physical time starts the snapshot's tag now (its start time moves by the time the program was
down). Either way times relative to the start are those of the run the snapshot came from, and
so are the digests. A snapshot is trusted like code (it is unpickled): load only your own.

Not in a snapshot: module-level variables (a file-level preamble's globals), events of physical
actions posted by other threads but not yet taken in, and what a reactor keeps outside its
attributes (open files, threads).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import pickle
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from .arguments import beneath, to_pairs
from .checkpoint_policy import (
    Policy,
    ProgramPolicy,
    kept_policy,
    policy_of,
    program_policy,
)
from .program import Program
from .snapshot import (
    Part,
    SnapshotError,
    capture,
    check_savable,
    merge,
    owned_instances,
    restore,
)
from .snapshot_file import (
    FORMAT,
    fingerprint,
    graph_hash,
    prune,
    read_file,
    snapshot_path,
    usable,
    versions,
    write_file,
)
from .tag import FOREVER

if TYPE_CHECKING:
    from .build import Assembly
    from .engine import TagEngine
    from .port import Port
    from .scheduler import Scheduler

# --------------------------------------------------------------------------- taking snapshots


class Checkpointer:
    """Takes the snapshots of one scheduler (one worker's share on several workers).

    ``graph``: the program model; ``program``: the built share; ``owned``: the ids of its
    reactors (None: all); ``ports``: the root ports whose values it saves (those its
    reactions write); ``me``/``workers``: this worker and the run's count; ``run_id``: names
    the parts; ``resumed``: the manifest of the snapshot this run resumes, or None.
    :meth:`tag_done` is called after each tag but the last; worker 0 calls :meth:`combine`
    after every worker reported the tag done.
    """

    def __init__(
        self,
        policy: Policy | ProgramPolicy,
        graph: Program,
        program: Assembly,
        owned: Collection[int] | None,
        ports: Iterable[Port],
        *,
        me: int = 0,
        workers: int = 1,
        run_id: str = "",
        resumed: dict[str, Any] | None = None,
    ):
        self.policy = policy
        self.name = graph.name or "program"
        self.instances = owned_instances(program, owned)
        self.ports = list(ports)
        self.me, self.workers, self.run_id = me, workers, run_id
        self.arguments = to_pairs(graph.arguments)
        self.reactors = fingerprint(graph) if me == 0 else {}
        self.graph = graph_hash(graph, self.reactors) if me == 0 else ""
        self.tags = resumed["tags"] if resumed else 0
        self.resumed_at = resumed["elapsed"] if resumed else 0  # ns since the start
        self.mark = 0
        self.skip = resumed is not None  # the resumed tag was counted by the run it continues
        self.checked = False
        self.off = False  # the program's own policy asks for no snapshots
        self.own = isinstance(policy, ProgramPolicy)  # the manifest keeps the policy
        self.pending: dict[str, Any] | None = None  # worker 0: the manifest of parts to join
        self.warned: set[str] = set()

    def tag_done(self, sched: Scheduler) -> None:
        """After tag ``sched``'s current tag: check once that every state can be saved,
        then snapshot if due.

        Raises:
            SnapshotError: a state variable cannot be pickled, or the program's own policy
                cannot be followed (at the first tag).
        """
        if not self.checked:
            self._begin()
        if self.off:
            return
        if self.skip:
            self.skip = False
            return
        self.tags += 1
        if not self._due(sched.engine) or sched.stop_signalled():
            return  # after a signal, reactions may have cut their work short: nothing to resume
        blob = pickle.dumps(capture(sched, self.instances, self.ports, self.warned), protocol=5)
        manifest = self._manifest(sched.engine)
        if self.workers == 1:
            self._write(manifest, [blob])
            return
        part = self._part_path(self.tags, self.me)
        with open(part + ".tmp", "wb") as f:
            f.write(blob)
        os.replace(part + ".tmp", part)
        if self.me == 0:
            self.pending = manifest

    def _begin(self) -> None:
        """At the first tag: ask the program for its policy if it gives its own, then check
        that every state can be saved."""
        self.checked = True
        if isinstance(self.policy, ProgramPolicy):
            policy = self.policy.resolve()
            if policy is None:
                self.off = True
                return
            self.policy = policy
        every = self._policy().every_ns
        self.mark = self.resumed_at // every if every else 0
        check_savable(self.instances)

    def combine(self, signalled: bool = False) -> None:
        """Worker 0, once every worker reported the tag done: join the parts of the pending
        snapshot into its file (nothing if none is pending). ``signalled``: a signal asked
        the run to stop (:meth:`reactors.scheduler.Scheduler.stop_signalled`), so some worker
        may have skipped its part: the parts written are removed instead."""
        manifest = self.pending
        if manifest is None:
            return
        self.pending = None
        paths = [self._part_path(manifest["tags"], w) for w in range(self.workers)]
        if signalled:
            for p in paths:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)
            return
        blobs = []
        for p in paths:
            with open(p, "rb") as f:
                blobs.append(f.read())
        self._write(manifest, blobs)
        for p in paths:
            os.unlink(p)

    def _due(self, engine: TagEngine) -> bool:
        policy = self._policy()
        if policy.every_tags and self.tags % policy.every_tags == 0:
            return True
        if policy.every_ns:
            mark = (engine.time - engine.start_time) // policy.every_ns
            if mark > self.mark:
                self.mark = mark
                return True
        return False

    def _part_path(self, tags: int, worker: int) -> str:
        name = f".{self.name}.{self.run_id}.{tags:012d}.w{worker}.part"
        return os.path.join(self._policy().directory, name)

    def _policy(self) -> Policy:
        assert isinstance(self.policy, Policy)  # resolved by _begin
        return self.policy

    def _manifest(self, engine: TagEngine) -> dict[str, Any]:
        start = engine.start_time
        stop = None
        if engine.stop_time < FOREVER:
            rel = engine.stop_time - start
            timeout = self._policy().timeout
            if timeout is None or (rel, engine.stop_micro) < (timeout, 0):
                stop = [rel, engine.stop_micro]  # lowered by a stop request
        return {
            "format": FORMAT,
            "program": self.name,
            "graph": self.graph,
            "start": start,
            "elapsed": engine.time - start,
            "micro": engine.micro,
            "tags": self.tags,
            "stop": stop,
            "workers": self.workers,
            "arguments": self.arguments,
            "policy": kept_policy(self._policy()) if self.own else None,
            "created": datetime.datetime.now(datetime.UTC).isoformat(),
            "versions": versions(),
            "reactors": self.reactors,
        }

    def _write(self, manifest: dict[str, Any], blobs: list[bytes]) -> None:
        policy = self._policy()
        write_file(snapshot_path(policy.directory, self.name, manifest["tags"]), manifest, blobs)
        prune(policy.directory, self.name, policy.keep)


# --------------------------------------------------------------------------- resuming


class Resume:
    """A snapshot to resume from (``path``), read and checked against ``graph``, for the
    scheduler that runs the reactors ``owned`` (None: all).

    Raises:
        SnapshotError: the file cannot be read, or is of another program or graph.
    """

    def __init__(self, path: str, graph: Program, owned: Collection[int] | None = None):
        self.path = usable(path, graph)
        self.manifest, blobs = read_file(self.path)
        self.owned = owned
        try:
            self.part: Part = merge(pickle.loads(b) for b in blobs)
        except Exception as e:
            raise SnapshotError(f"cannot read the snapshot {self.path}: {e}") from None

    @property
    def tag(self) -> tuple[int, int]:
        """The snapshot's tag: (ns since the start, microstep)."""
        return self.manifest["elapsed"], self.manifest["micro"]

    def shift(self, engine: TagEngine) -> None:
        """Move ``engine``, just begun at physical time ``engine.time``, to the snapshot's
        tag. A fast run keeps the start time of the run it continues (so that times a
        reactor stored are still right); otherwise the snapshot's tag is now, and the start
        time that much earlier. The stop tag is the run's timeout after the start (or the
        snapshot's stop request, if earlier)."""
        elapsed, micro = self.tag
        start = self.manifest["start"] if engine.timing.fast else engine.time - elapsed
        engine.start_time, engine.time, engine.micro = start, start + elapsed, micro
        timeout = engine.timing.timeout
        engine.stop_time, engine.stop_micro = FOREVER, 0
        if timeout is not None:
            engine.stop_time = min(start + timeout, FOREVER)
        stop = self.manifest["stop"]
        if stop is not None:
            engine.lower_stop(start + stop[0], stop[1])

    def enter(self, sched: Scheduler) -> None:
        """One worker: be at the snapshot's tag (``sched``'s engine just began) with the
        snapshot's state."""
        self.shift(sched.engine)
        self.restore(sched)

    def restore(self, sched: Scheduler) -> None:
        """Restore the snapshot into ``sched``, whose engine is at the snapshot's tag."""
        restore(sched, self.part, owned_instances(sched.program, self.owned))


def with_arguments(graph: Program, path: str) -> Program:
    """``graph`` with the main-reactor arguments (``--NAME VALUE``) of the run that took the
    snapshot file ``path``, but those ``graph`` has itself (this command line's): a resumed
    run continues with the parameters of the run it continues unless told otherwise."""
    manifest, _ = read_file(path, parts=False)
    arguments = beneath(manifest.get("arguments", ()), graph.arguments)
    return dataclasses.replace(graph, arguments=arguments)


def attach(
    sched: Scheduler,
    graph: Program,
    opts: Any,
    owned: Collection[int] | None,
    ports: Iterable[Port],
    *,
    me: int = 0,
    workers: int = 1,
) -> Resume | None:
    """Give ``sched`` its :class:`Checkpointer` and :class:`Resume` as the options ask
    (``opts.resume``: a path or None), or, when they ask for no snapshots, as the program's
    own policy does (:func:`program_policy`); returns the Resume (for the coordinator).

    Raises:
        SnapshotError: the snapshot to resume from cannot be used.
    """
    resume = Resume(opts.resume, graph, owned) if opts.resume else None
    given = policy_of(opts)
    resumed = None if resume is None else (resume.manifest, resume.path)
    policy = given if given.active else program_policy(sched.program, opts.timeout, resumed)
    if policy is not None:
        sched.checkpoint = Checkpointer(
            policy,
            graph,
            sched.program,
            owned,
            ports,
            me=me,
            workers=workers,
            run_id=opts.run_id,
            resumed=None if resume is None else resume.manifest,
        )
    sched.resume = resume
    return resume
