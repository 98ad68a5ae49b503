"""A parallel run's records: each worker writes its own digest and timing trace files
(``<file>.w<worker>``); after a successful run the supervisor merges them into the files one
worker would have written (:func:`reactors.trace.merge`, :func:`reactors.trace.write_timeline`).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .trace import Digest, Timeline, merge, write_timeline


def write_records(opts: Any, me: int, digest: Digest | None, timeline: Timeline | None) -> None:
    """Worker ``me``'s digest (to ``opts.digest``.w``me``) and timeline (to
    ``opts.trace_file``.w``me``), those that are not None."""
    if digest is not None:
        digest.write(f"{opts.digest}.w{me}")
    if timeline is not None:
        with open(f"{opts.trace_file}.w{me}", "w", encoding="utf-8") as f:
            json.dump(timeline.json_events(), f)


def merge_records(opts: Any, workers: int) -> None:
    """After a successful run: combine the workers' digest and timeline files (and remove
    them)."""
    if opts.digest:
        merge([f"{opts.digest}.w{w}" for w in range(workers)], opts.digest)
    if opts.trace_file:
        events = []
        for w in range(workers):
            p = f"{opts.trace_file}.w{w}"
            if os.path.exists(p):
                with open(p, encoding="utf-8") as f:
                    events += json.load(f)
                os.unlink(p)
        write_timeline(events, opts.trace_file)
