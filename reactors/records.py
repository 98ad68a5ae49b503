"""A parallel run's records: each worker writes its own digest and timing trace files
(``<file>.w<worker>``) when it ends, whatever the way (finished, stopped, failed); once the
workers are joined, the supervisor merges them into the files one worker would have written
(:func:`reactors.trace.merge`, :func:`reactors.trace.write_timeline`), so a run that exits
non-zero or is interrupted keeps the tags it computed.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .engine import TagPair
from .recording import join
from .replay import Tape
from .sync import FINISHED, GO_M, GO_T, START_T, STATE, Control
from .trace import Digest, Timeline, merge, write_timeline


def write_records(
    opts: Any,
    me: int,
    digest: Digest | None,
    timeline: Timeline | None,
    tape: Tape | None = None,
    finished: bool = False,
) -> None:
    """Worker ``me``'s digest (to ``opts.digest``.w``me``), timeline (to
    ``opts.trace_file``.w``me``) and recording or replay (its part is closed, with the last
    tag when the run ``finished``), those that are not None.

    Raises:
        ReplayError: a finished replay ended at another tag than the recording.
    """
    if digest is not None:
        digest.write(f"{opts.digest}.w{me}")
    if timeline is not None:
        with open(f"{opts.trace_file}.w{me}", "w", encoding="utf-8") as f:
            json.dump(timeline.json_events(), f)
    if tape is not None:
        tape.close(tape.elapsed() if finished else None)


def merge_records(opts: Any, workers: int, cut: TagPair | None = None) -> None:
    """After a run, however it ended: combine the workers' digest and timeline files (and
    remove them). ``cut``: the tag (elapsed ns, microstep) a failed or stopped run was in,
    whose digest lines are left out (see :func:`cut_tag`); None for a finished run. Nothing
    is written when no worker wrote its part (none got to run)."""
    if opts.record:
        join(opts.record, workers)
    parts = [f"{opts.digest}.w{w}" for w in range(workers)] if opts.digest else []
    if any(os.path.exists(p) for p in parts):
        merge(parts, opts.digest, cut)
    traces = [f"{opts.trace_file}.w{w}" for w in range(workers)] if opts.trace_file else []
    if any(os.path.exists(p) for p in traces):
        events = []
        for p in traces:
            if os.path.exists(p):
                with open(p, encoding="utf-8") as f:
                    events += json.load(f)
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
