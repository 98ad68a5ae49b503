"""A parallel run's records: each worker writes its own digest and timing trace files (its
parts, :func:`reactors.records.recording_file.part_file`) when it ends, whatever the way (finished,
stopped, failed); once the workers are joined, the supervisor merges them into the files one worker
would have written (:func:`reactors.records.trace.merge`,
:func:`reactors.records.trace.write_timeline`) and joins the parts of a recording
(:func:`reactors.records.recording_file.join`), so a run that exits non-zero or is interrupted keeps
the tags it computed. A file that cannot be written (a full disk) is said once, by the first worker
or the supervisor that meets it (:func:`reactors.core.errors.say_once`), keeps what was written
whole (:mod:`reactors.records.trace`, :mod:`reactors.records.recording_file`), and fails the run;
the parts of a snapshot that a failed run did not join are removed
(:func:`reactors.records.snapshot_file.discard_parts`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from ..core.engine import TagPair
from ..core.errors import RecordError, forget_said, say_once
from ..records.recording_file import ReplayError, join, part_file
from ..records.replay import Tape
from ..records.snapshot_file import discard_parts
from ..records.trace import Digest, Timeline, merge, write_timeline
from .sync import FINISHED, GO_M, GO_T, START_T, STATE, Control


def write_records(
    opts: Any,
    me: int,
    digest: Digest | None,
    timeline: Timeline | None,
    tape: Tape | None = None,
    finished: bool = False,
) -> None:
    """Worker ``me``'s digest and timeline (to their parts) and recording or replay (its part
    is closed, with the last tag when the run ``finished``), those that are not None; each
    once (a later call writes nothing of it again), each whatever happens to the others.

    Raises:
        RecordError: a file cannot be written (the message names the file the user named;
            several files, one line each).
        ReplayError: a finished replay ended at another tag than the recording, or the
            recording cannot be written.
    """
    steps: list[Callable[[], None]] = []
    if digest is not None and not digest.written:
        steps.append(lambda: digest.write(part_file(opts.digest, opts.run_id, me), opts.digest))
    if timeline is not None and not timeline.written:
        part = part_file(opts.trace_file, opts.run_id, me)
        steps.append(lambda: timeline.write(part, opts.trace_file))
    if tape is not None:
        steps.append(lambda: tape.close(tape.elapsed() if finished else None))
    write_all(steps)


def write_all(steps: list[Callable[[], None]]) -> None:
    """Call each of ``steps`` (writing a record of the run), whichever of them fails.

    Raises:
        RecordError: a step raised it (several that failed: one line each).
        ReplayError: the only step that failed raised it.
    """
    problems: list[Exception] = []
    for step in steps:
        try:
            step()
        except (RecordError, ReplayError) as e:
            problems.append(e)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise RecordError("\n".join(map(str, problems)))


def merge_records(opts: Any, workers: int, cut: TagPair | None = None) -> list[str]:
    """After a run, however it ended: join the workers' recording parts, combine their digest
    and timeline files (and remove them), and remove the parts of a snapshot they did not
    join. ``cut``: the tag (elapsed ns, microstep) a failed or stopped run was in, whose
    digest lines are left out (see :func:`cut_tag`); None for a finished run. Nothing is
    written when no worker wrote its part (none got to run). Returns what cannot be written
    and no worker said yet (one line each, for the supervisor to say; the run then fails)."""
    problems: list[str] = []
    if opts.record:
        _attempt(problems, lambda: join(opts.record, workers, opts.run_id))
    parts = [part_file(opts.digest, opts.run_id, w) for w in range(workers)] if opts.digest else []
    if any(os.path.exists(p) for p in parts):
        _attempt(problems, lambda: merge(parts, opts.digest, cut))
    if opts.trace_file:
        _attempt(problems, lambda: _merge_timelines(opts, workers))
    discard_parts(opts.run_id)
    new = [m for m in problems if say_once(opts.run_id, m)]
    forget_said(opts.run_id)
    return new


def _attempt(problems: list[str], step: Callable[[], None]) -> None:
    """Call ``step``; what it could not write goes to ``problems``."""
    try:
        step()
    except (RecordError, ReplayError) as e:
        problems.append(str(e))
    except OSError as e:  # a worker's part that cannot be read back
        problems.append(f"cannot finish the run's records: {e}")


def _merge_timelines(opts: Any, workers: int) -> None:
    """The workers' timeline parts into ``opts.trace_file`` (none: nothing written)."""
    traces = [part_file(opts.trace_file, opts.run_id, w) for w in range(workers)]
    if not any(os.path.exists(p) for p in traces):
        return
    events = []
    for p in traces:
        if os.path.exists(p):
            try:
                with open(p, encoding="utf-8") as f:
                    events += json.load(f)
            except ValueError:  # a worker killed while writing it
                pass
            os.unlink(p)
    write_timeline(events, opts.trace_file)


def cut_tag(ctl: Control) -> TagPair | None:
    """The tag (elapsed ns, microstep) a parallel run was in when it ended without finishing
    (the last tag the coordinator started), or None when it finished. Read after the workers
    stopped: no tag starts any more."""
    cells = ctl.cells
    if cells[STATE] == FINISHED:
        return None
    return cells[GO_T] - cells[START_T], cells[GO_M]
