"""Files a reactor still owes when its run ends without its shutdown reactions.

Ctrl-C, SIGTERM or a failing reaction end a run at once: shutdown reactions do not run, so a
learner's ``model.pt`` and a logger's ``learning_curve.png`` would be lost. A reactor that
writes such files at shutdown also registers a :class:`Salvage` when it starts: its function
runs when the reactor's process exits (Python's ``atexit``, which every backend reaches after
a stop: the one-worker launcher returns its status, worker processes end with ``sys.exit`` or,
stopped on a signal, run the ``atexit`` functions before skipping the interpreter's tear-down,
worker threads end before their process), unless the shutdown reaction cancelled it after
writing the files itself. Functions run in the order they were registered; one that raises
is reported on stderr and the others still run. The exit status of the run is unchanged.

A Salvage can be saved in a checkpoint (pickled with its reactor's state) when its function
can: a module-level function or a ``functools.partial`` of one, not a lambda. Restored in a
resumed run, it is registered again in the new process.
"""

from __future__ import annotations

import atexit
import itertools
import sys
import threading
from collections.abc import Callable

_lock = threading.Lock()
_pending: dict[int, Callable[[], object]] = {}
_keys = itertools.count()
_hooked = False


class Salvage:
    """Run ``save`` (no arguments) once at process exit unless :meth:`cancel` is called
    first. ``what`` names the files in the message printed on stderr if ``save`` raises."""

    def __init__(self, save: Callable[[], object], what: str = "files") -> None:
        self._register(save, what)

    def _register(self, save: Callable[[], object], what: str) -> None:
        global _hooked
        self.save, self.what, self.cancelled = save, what, False
        with _lock:
            self.key = next(_keys)
            _pending[self.key] = self._guarded(save)
            if not _hooked:
                atexit.register(run_pending)
                _hooked = True

    def __getstate__(self) -> dict[str, object]:
        """The function, ``what`` and whether it was cancelled (pickling fails if the
        function cannot be pickled)."""
        return {"save": self.save, "what": self.what, "cancelled": self.cancelled}

    def __setstate__(self, state: dict[str, object]) -> None:
        """Register the function again unless it was cancelled (a resumed run, in its own
        process)."""
        self._register(state["save"], str(state["what"]))  # type: ignore[arg-type]
        if state.get("cancelled"):
            self.cancel()

    def cancel(self) -> None:
        """Forget the function (the shutdown reaction wrote the files itself); idempotent."""
        self.cancelled = True
        with _lock:
            _pending.pop(self.key, None)

    def _guarded(self, save: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            try:
                return save()
            except Exception as e:
                sys.stderr.write(f"could not save the {self.what} of the stopped run: {e!r}\n")
                return None

        return run


def run_pending() -> None:
    """Run every function not cancelled, in registration order, and forget them (what
    ``atexit`` calls; tests may call it directly)."""
    with _lock:
        functions = [_pending[k] for k in sorted(_pending)]
        _pending.clear()
    for fn in functions:
        fn()
