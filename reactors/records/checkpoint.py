"""Checkpoints of a whole program (``--checkpoint-every``, ``--checkpoint-every-tags``) and
resuming from one (``--resume``).

**When.** After a tag completes (not the last one, nor one after a signal asked the run to
stop: its reactions may have cut their work short): with ``--checkpoint-every-tags N``, after
every N-th tag of the run (counted from the start tag, resumed runs included); with
``--checkpoint-every N UNIT``, after the first tag at or past each multiple of that logical
time since the start. What a snapshot holds is described in :mod:`reactors.records.snapshot`.

**The program's own policy.** A main reactor may give the policy itself
(``lf_checkpoint_policy``); which of the command line's, the program's and the one a resumed
run keeps wins is said in :mod:`reactors.records.checkpoint_policy`.

**Where.** ``<dir>/<program>.<run>.<tags:012d>.lfsnap`` (``run``: the first 8 digits of the
run id, ``lf.run_id()``; ``tags``: how many tags had completed), the last K of the run kept
(``--checkpoint-keep``; other runs' snapshots in the same directory are theirs:
:mod:`reactors.records.snapshot_runs`). A file (:mod:`reactors.records.snapshot_file`) is ``MAGIC``,
one line of JSON (the manifest: program, run id, graph hash and the hash of each reactor, tag, tag
count, stop tag, the policy, the main-reactor arguments of the command line, versions), then
the parts, each an 8-byte big-endian length and a pickle (one part per worker; a part keeps
each reactor's state as its own pickle, so a worker unpickles only the reactors it runs), then
the HMAC of the whole. Files are written to a temporary name, fsynced and renamed; one that
cannot be written (a full disk) stops the run with one line naming it, leaving no temporary
file and the older snapshots as they were. On several workers, each worker writes its part
(with an HMAC of its own) beside the directory at the same tag, before it reports the tag
done; worker 0 checks the parts and joins them into one file once every worker reported. From its first tag to its end,
the process of worker 0 holds the lock of the run (:mod:`reactors.records.run_lock`), and once the
run reached its stop tag (not stopped by a signal) it marks the run finished.

**Resume.** ``--resume PATH`` (a snapshot file; a directory: the newest snapshot of the one
run of the program there, or in its ``checkpoints`` folder, such as an RL run directory; see
:func:`reactors.records.snapshot_runs.choose` for the refusals: several runs, a finished run) checks
that the snapshot is of this program and of the same graph (else refuses with what differs)
and takes the run's lock before anything else (:func:`claim`: a second resume of the same run
is refused at once, naming the process that writes it). The resumed run is the same run: it
keeps the run id (``lf.run_id()``), takes the main-reactor arguments of the run it continues
(those given again on the command line win) and goes on taking snapshots as that run did,
beside the snapshot it resumed from (the policy a manifest keeps; the command line's wins).
It builds the program as usual, then starts at the snapshot's tag, already run: no startup
reaction runs, the state and pending events are restored, each reactor's resume hook runs
(below), and the next tag follows by the usual rules. A fast run keeps the start time of the
run it continues; a run that waits for physical time starts the snapshot's tag now (its start
time moves by the time the program was down). Either way times relative to the start are
those of the run the snapshot came from, and so are the digests. A snapshot is unpickled,
which can run any code: it carries an HMAC under the user's key (:mod:`reactors.records.user_key`),
checked before anything in it is used, and one that is not authenticated (another user's,
changed, or of an older version) is refused unless ``--trust`` is given.

**The resume hook.** What a reactor set up for its process in its startup reaction (torch's
threads and deterministic algorithms, an open connection, a helper thread) is not in a
snapshot, and a resumed run runs no startup reaction. A reactor that defines the method
``lf_resumed(self)`` (:data:`RESUME_HOOK`; an LF ``method lf_resumed() {= ... =}`` or a
``def`` in a preamble inside the reactor) has it called in a resumed run, once, on the worker
that runs the reactor (in its thread, on the threads backend), after every state of that
worker was restored and before the first tag after the snapshot's; ``lf.time.start()`` and
``lf.run_id()`` are those of the run, and an exception it raises stops the run. It sets up
the process as the startup reaction did, and must not change what the program computes: no
state variable that a reaction reads (a method reaches no port or action), or a resumed run
would depart from the uninterrupted one. The library's torch reactors (``lf_src/lib``) call
:func:`rl_algos.device.configure_torch` there.

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

from ..core.tag import FOREVER
from ..model.arguments import beneath, to_pairs
from ..model.program import Program
from .checkpoint_policy import Policy, PolicySources, kept_policy, policy_sources
from .run_lock import hold
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
    check_key,
    fingerprint,
    graph_hash,
    note_parts,
    read_file,
    read_part,
    usable,
    versions,
    write_file,
    write_part,
)
from .snapshot_runs import (
    choose,
    finished,
    finished_when,
    lock_path,
    mark_finished,
    prune,
    snapshot_path,
    unmark_finished,
)

if TYPE_CHECKING:
    from ..core.assembly import Assembly
    from ..core.engine import TagEngine
    from ..core.log import Log
    from ..core.port import Port
    from ..core.scheduler import Scheduler

#: The reactor method a resumed run calls on each reactor that defines it (module docstring).
RESUME_HOOK = "lf_resumed"

# --------------------------------------------------------------------------- taking snapshots


class Checkpointer:
    """Takes the snapshots of one scheduler (one worker's share on several workers).

    ``sources``: where its policy comes from (resolved at the first tag); ``graph``: the
    program model; ``program``: the built share; ``owned``: the ids of its reactors (None:
    all); ``ports``: the root ports whose values it saves (those its reactions write);
    ``me``/``workers``: this worker and the run's count; ``run_id``: the run's, which names
    its snapshots; ``resumed``: the manifest of the snapshot this run resumes, or None;
    ``held``: the lock file the launcher holds (that of the run it resumes), if any.
    :meth:`tag_done` is called after each tag but the last; worker 0 calls :meth:`combine`
    after every worker reported the tag done, and :meth:`ended` once the run ended.
    """

    def __init__(
        self,
        sources: PolicySources,
        graph: Program,
        program: Assembly,
        owned: Collection[int] | None,
        ports: Iterable[Port],
        *,
        me: int = 0,
        workers: int = 1,
        run_id: str = "",
        resumed: dict[str, Any] | None = None,
        held: str = "",
    ):
        self.sources = sources
        self.policy: Policy | None = None  # resolved at the first tag
        self.held = held
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
        self.off = False  # the policy asks for no snapshots
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
        write_part(self._part_path(self.tags, self.me), blob, self.path(self.tags))
        if self.me == 0:
            self.pending = manifest

    def _begin(self) -> None:
        """At the first tag: resolve the policy, take the run's lock (worker 0), then check
        that every state can be saved."""
        self.checked = True
        policy = self.sources.resolve()
        if policy is None:
            self.off = True
            return
        self.policy = policy
        every = policy.every_ns
        self.mark = self.resumed_at // every if every else 0
        lock = lock_path(policy.directory, self.name, self.run_id)
        if self.me == 0 and os.path.abspath(lock) != os.path.abspath(self.held or "."):
            hold(lock, f"cannot take the snapshots of run {self.run_id[:8]} of {self.name}")
        check_savable(self.instances)
        check_key()
        if self.workers > 1 and self.me == 0:
            note_parts(self.run_id, policy.directory)

    def ended(self, sched: Scheduler) -> None:
        """Once the run ended, however it ended (worker 0; nothing elsewhere): mark the run
        finished if ``sched`` reached the stop tag and no signal stopped it
        (:func:`reactors.records.snapshot_runs.mark_finished`)."""
        policy, engine = self.policy, sched.engine
        if self.me != 0 or policy is None or not sched.stopping or sched._signal():
            return
        tag = (engine.time - engine.start_time, engine.micro)  # the stop tag
        try:
            mark_finished(policy.directory, self.name, self.run_id, tag)
        except OSError as e:  # the run stays resumable, as if it had been killed
            sched.log.warn(f"cannot mark run {self.run_id[:8]} finished in {policy.directory}: {e}")

    def path(self, tags: int) -> str:
        """The file of this run's snapshot after ``tags`` tags."""
        return snapshot_path(self._policy().directory, self.name, self.run_id, tags)

    def combine(self, signalled: bool = False) -> None:
        """Worker 0, once every worker reported the tag done: join the parts of the pending
        snapshot into its file (nothing if none is pending). ``signalled``: a signal asked
        the run to stop (:meth:`reactors.core.scheduler.Scheduler.stop_signalled`), so some worker
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
        try:
            self._write(manifest, [read_part(p) for p in paths])
        finally:  # joined, or lost (the run stops): the parts are of no more use
            for p in paths:
                with contextlib.suppress(FileNotFoundError):
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
        assert self.policy is not None  # resolved by _begin
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
            "run_id": self.run_id,
            "graph": self.graph,
            "start": start,
            "elapsed": engine.time - start,
            "micro": engine.micro,
            "tags": self.tags,
            "stop": stop,
            "workers": self.workers,
            "arguments": self.arguments,
            "policy": kept_policy(self._policy()),
            "created": datetime.datetime.now(datetime.UTC).isoformat(),
            "versions": versions(),
            "reactors": self.reactors,
        }

    def _write(self, manifest: dict[str, Any], blobs: list[bytes]) -> None:
        policy = self._policy()
        write_file(self.path(manifest["tags"]), manifest, blobs)
        prune(policy.directory, self.name, self.run_id, policy.keep)


# --------------------------------------------------------------------------- resuming


class Resume:
    """A snapshot to resume from (``path``), read and checked against ``graph``, for the
    scheduler that runs the reactors ``owned`` (None: all).

    Raises:
        SnapshotError: the file cannot be read, or is of another program or graph.
    """

    def __init__(
        self, path: str, graph: Program, owned: Collection[int] | None = None, trust: bool = False
    ):
        self.path = usable(path, graph, trust)  # trust: see snapshot_file.read_file
        self.manifest, blobs = read_file(self.path, trust=trust)
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
        """Restore the snapshot into ``sched``, whose engine is at the snapshot's tag, then
        call the resume hook (:data:`RESUME_HOOK`) of each of its reactors that has one, in
        instance order."""
        instances = owned_instances(sched.program, self.owned)
        restore(sched, self.part, instances)
        for inst in instances:
            hook = getattr(inst.obj, RESUME_HOOK, None)
            if hook is not None:
                hook()


def hold_resumed(path: str, graph: Program) -> None:
    """Take, for this process, the lock of the run that ``--resume path`` continues (as
    :func:`claim` does, which then finds it held), reading no more than the snapshot's
    manifest: what the launcher does before the program's module loads, so that a run
    another process writes is refused at once. Whatever else is wrong with the snapshot is
    left to :func:`claim` (nothing is said here then).

    Raises:
        SnapshotError: another process is writing that run (one line naming it and the
            process).
    """
    name = graph.name or "program"
    try:
        file = choose(path, name)
        run_id = _run_of(file)
    except (SnapshotError, OSError, ValueError):
        return
    _hold_run(file, name, run_id)


def _run_of(file: str) -> str:
    """The run id in the manifest of the snapshot ``file`` ("" for one older than run ids);
    only the manifest is read, nothing is unpickled."""
    return str(read_file(file, parts=False, trust=True)[0].get("run_id") or "")


def _hold_run(file: str, name: str, run_id: str) -> None:
    """Take the lock of the run ``run_id`` of the program ``name`` whose snapshot is
    ``file`` (:func:`reactors.records.run_lock.hold`)."""
    hold(
        lock_path(os.path.dirname(file), name, run_id), f"cannot resume run {run_id[:8]} of {name}"
    )


def claim(path: str, graph: Program, log: Log, trust: bool = False) -> tuple[str, str]:
    """The snapshot file that ``--resume path`` names for ``graph``
    (:func:`reactors.records.snapshot_runs.choose`), checked (:func:`usable`), and the id of the run
    it continues ("" for a snapshot older than run ids), that run's lock taken for this
    process (:mod:`reactors.records.run_lock`) before anything is written. A snapshot file named
    of a run that finished runs it again from there: said on ``log``, and the run is no
    longer marked finished.

    Raises:
        SnapshotError: the snapshot cannot be chosen or used, or another process is writing
            that run (one line naming it and the process).
    """
    name = graph.name or "program"
    file = usable(choose(path, name), graph, trust, log.warn)  # trust: snapshot_file.read_file
    run_id = _run_of(file)
    folder = os.path.dirname(file)
    _hold_run(file, name, run_id)
    mark = finished(folder, name, run_id)
    if mark is not None:
        log.warn(
            f"run {run_id[:8]} of {name} finished {finished_when(mark)}; resuming {file} "
            "runs it again from there, rewriting what it wrote after that snapshot"
        )
        unmark_finished(folder, name, run_id)
    return file, run_id


def with_arguments(graph: Program, path: str, trust: bool = False) -> Program:
    """``graph`` with the main-reactor arguments (``--NAME VALUE``) of the run that took the
    snapshot file ``path``, but those ``graph`` has itself (this command line's): a resumed
    run continues with the parameters of the run it continues unless told otherwise."""
    manifest, _ = read_file(path, parts=False, trust=trust)
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
    (``opts.resume``: the snapshot file, claimed by the launcher, or None) and the program's
    own policy (:func:`reactors.records.checkpoint_policy.policy_sources`); returns the Resume (for
    the coordinator).

    Raises:
        SnapshotError: the snapshot to resume from cannot be used.
    """
    resume = Resume(opts.resume, graph, owned, opts.trust) if opts.resume else None
    resumed = None if resume is None else (resume.manifest, resume.path)
    sources = policy_sources(sched.program, opts, resumed)
    if sources is not None:
        held = ""
        if resume is not None:
            run = str(resume.manifest.get("run_id") or "")
            held = lock_path(os.path.dirname(resume.path), graph.name or "program", run)
        sched.checkpoint = Checkpointer(
            sources,
            graph,
            sched.program,
            owned,
            ports,
            me=me,
            workers=workers,
            run_id=opts.run_id,
            resumed=None if resume is None else resume.manifest,
            held=held,
        )
    sched.resume = resume
    return resume


def run_ended(sched: Scheduler | None) -> None:
    """What the launcher (one worker) or a worker calls once its run ended, however it ended
    (``sched``: its scheduler, None if it was never made): see :meth:`Checkpointer.ended`."""
    if sched is not None and sched.checkpoint is not None:
        sched.checkpoint.ended(sched)
