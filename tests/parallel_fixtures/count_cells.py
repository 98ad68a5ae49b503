"""Run a built program's module on the threads backend with its control block's cells counted
(the runtime from its sources: ``REACTORS_COMPILED=0``), then print one line ``COUNTS {json}``
on stderr: for each worker, how many distinct cells of the next-tag agreement (``DONE``,
reports, subtree cells and the root's decision) outside its own block it read or wrote.

Usage: python count_cells.py MODULE.py ARGS...   (the program's own options: -w N ...)
"""

from __future__ import annotations

import collections
import importlib
import json
import os
import sys
import threading

from reactors.parallel import sync

touched: dict[int, set[int]] = collections.defaultdict(set)
written: dict[int, set[int]] = collections.defaultdict(set)
blocks: list[sync.Control] = []


class Counting:
    """An int64 cell array that notes which cells each thread touches."""

    def __init__(self, cells: memoryview):
        self.cells = cells

    def __getitem__(self, i: int) -> int:
        touched[threading.get_ident()].add(i)
        return self.cells[i]

    def __setitem__(self, i: int, v: int) -> None:
        me = threading.get_ident()
        touched[me].add(i)
        written[me].add(i)
        self.cells[i] = v

    def __len__(self) -> int:
        return len(self.cells)


_init = sync.Control.__init__


def _counted_init(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.cells = self.local_cells = Counting(self.cells)
    blocks.append(self)


def agreement_cells(ctl: sync.Control) -> set[int]:
    """Every cell the next-tag agreement of a free-running run may touch."""
    out = {sync.AGREE_SEQ, *range(sync.AGREE[0], sync.AGREE[0] + 4)}
    out |= set(range(sync.AGREE[1], sync.AGREE[1] + 4))
    for w in range(ctl.workers):
        b = ctl.worker_base(w)
        out |= {b + sync.DONE, b + sync.SUB_DONE}
        for p in (0, 1):
            out |= set(range(b + sync.REPORT[p], b + sync.REPORT[p] + 4))
            out |= set(range(b + sync.SUBREP[p], b + sync.SUBREP[p] + 4))
    return out


def main() -> None:
    sync.Control.__init__ = _counted_init
    path, args = sys.argv[1], sys.argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    module = importlib.import_module(os.path.basename(path)[: -len(".py")])
    status = module.main(args)
    ctl = blocks[0]
    agreement = agreement_cells(ctl)
    counts = {}
    for tid, cells in written.items():
        mine = [w for w in range(ctl.workers) if ctl.worker_base(w) + sync.DONE in cells]
        if len(mine) == 1:
            b = ctl.worker_base(mine[0])
            own = set(range(b, b + sync.WORKER_STRIDE))
            counts[mine[0]] = len((touched[tid] & agreement) - own)
    print("COUNTS " + json.dumps(counts), file=sys.stderr)
    sys.exit(status)


if __name__ == "__main__":
    main()
