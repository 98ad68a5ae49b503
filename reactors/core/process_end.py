"""How a program's processes end: without the interpreter's tear-down of its modules.

Once torch is loaded, the tear-down that follows ``sys.exit`` (freeing every module and the
objects they hold) takes most of a second on this machine, a second the user waits for the
prompt after every run, and a second of every benchmark's wall time. :func:`quick_exit` keeps
what an ordinary exit promises and skips only that tear-down.
"""

from __future__ import annotations

import _io
import atexit
import ctypes
import gc
import io
import os
import signal
import sys
import threading
from typing import NoReturn

#: The exit statuses of a run stopped by SIGHUP, SIGINT or SIGTERM.
SIGNAL_STATUSES = frozenset(128 + s for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM))


def quick_exit(status: int, *, wait_threads: bool = True) -> NoReturn:
    """End this process with exit status ``status`` (0-255) as ``sys.exit`` would, but for
    the tear-down of the interpreter's modules.

    In order: with ``wait_threads``, join the threads that are not daemons (the interpreter
    does so before it exits; a run stopped by a signal passes False: the user waits); run the
    ``atexit`` functions; close every open, writable Python file object, as the tear-down
    closes those it frees (a file a reaction left open, a gzip stream and its trailer), the
    standard streams only flushed; flush C's stdio buffers; ``os._exit``. What is skipped is
    the ``__del__`` of objects still alive at the exit, which Python does not promise to call
    either ("Data model", ``object.__del__``).
    """
    if wait_threads:
        me = threading.current_thread()
        for t in threading.enumerate():
            if t is not me and not t.daemon:
                t.join()
    atexit._run_exitfuncs()
    _flush_files()
    os._exit(status)


#: builtin file layers, closed after the wrappers above them (a text layer, a gzip stream)
_BUILTIN_BUFFERED = (io.BufferedWriter, io.BufferedRandom, io.BufferedReader)
_IN_MEMORY = (io.StringIO, io.BytesIO)


def _layer(cls: type) -> int | None:
    """The order in which a file object of class ``cls`` (a subclass of ``_io._IOBase``) is
    closed at the exit (outer layers first, since closing one writes into the one under
    it), or None for in-memory buffers (nothing to write)."""
    if issubclass(cls, _IN_MEMORY):
        return None
    if issubclass(cls, io.TextIOBase):
        return 0
    if issubclass(cls, io.BufferedIOBase):
        return 2 if issubclass(cls, _BUILTIN_BUFFERED) else 1
    return 3


def _file_classes() -> dict[type, int]:
    """Every class of file object defined now (the subclasses of ``_io._IOBase``, the base
    of both the C and the Python implementations) with its :func:`_layer`."""
    found: dict[type, int] = {}
    todo: list[type] = [_io._IOBase]
    while todo:
        sub: type
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                rank = _layer(sub)
                if rank is not None:
                    found[sub] = rank
                todo.append(sub)
    return found


def _flush_files() -> None:
    """Close the open, writable Python file objects as the tear-down would (flushed, then
    closed: a gzip stream writes its trailer), outer layers first; the standard streams are
    only flushed. Then flush every C ``FILE`` stream (``fflush(NULL)``)."""
    layers = _file_classes()
    # type(o), not o.__class__: that may be a property with side effects
    files = sorted(
        (o for o in gc.get_objects() if type(o) in layers), key=lambda o: layers[type(o)]
    )
    std = {id(f) for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__) if f}
    for f in files:
        try:
            if f.closed or not f.writable():
                continue
            if id(f) in std or _is_std(f):
                f.flush()
            else:
                f.close()
        except (OSError, ValueError, AttributeError):  # a broken pipe, a layer closed below
            pass
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to ask
        pass


def _is_std(f: io.IOBase) -> bool:
    """Whether ``f`` writes to file descriptor 1 or 2 (a layer under ``sys.stdout``)."""
    try:
        return f.fileno() in (1, 2)
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


def end_process(status: int) -> NoReturn:
    """End the program's process with exit status ``status`` (what
    :func:`reactors.launch.main.main` returned), by :func:`quick_exit`; after a run stopped by a
    signal without waiting for threads that are not daemons."""
    quick_exit(status, wait_threads=status not in SIGNAL_STATUSES)
