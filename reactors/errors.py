"""Errors of the runtime and how a failure is reported to the user (spec §2.9).

A failing reaction is reported on stderr with the reactor instance, the reaction and the
``.lf`` file:line, followed by the user's traceback: frames of the runtime itself are dropped
and lines of the generated module are translated to ``.lf`` lines through graph.json's
``line_map``.
"""

from __future__ import annotations

import bisect
import errno
import json
import linecache
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from .log import Log

_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))

#: A source position ``(file, line)``; the line is None where Python has none.
Position = tuple[str, int | None]


class LaunchError(Exception):
    """The program cannot start: bad command-line options or an unreadable graph."""


class GraphError(LaunchError):
    """graph.json is malformed or does not match the generated module (PROGRAM.md)."""


class ProgramFormatError(GraphError):
    """A graph.json of another format version or shape than :mod:`reactors.program` reads.

    ``source`` names the file (or ``<graph.json>``); ``problem`` says which field is wrong,
    what was expected and what was found.
    """

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class Signalled(BaseException):
    """A signal that ends the run reached the program's main thread: ``status`` is the exit
    status (128 + the signal's number), ``message`` what to say (without the ``----``)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


#: The signals that end a run, besides SIGINT (KeyboardInterrupt): name, what is said.
STOP_SIGNALS = {signal.SIGTERM: "Terminated (SIGTERM)", signal.SIGHUP: "Hung up (SIGHUP)"}


def catch_stop_signals() -> dict[int, Any] | None:
    """Turn SIGTERM and SIGHUP into :class:`Signalled` (status 143, 129) while a run lasts;
    returns the handlers to give back to :func:`restore_signals` (None off the main thread,
    where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        raise Signalled(128 + signum, STOP_SIGNALS[signal.Signals(signum)])

    return {s: signal.signal(s, handler) for s in STOP_SIGNALS}


def restore_signals(saved: dict[int, Any] | None) -> None:
    """Give back the handlers that :func:`catch_stop_signals` replaced."""
    for s, h in (saved or {}).items():
        signal.signal(s, h if h is not None else signal.SIG_DFL)


class BuildFailure(Exception):
    """User code raised while the program was being built (``what`` says where); the
    original exception is ``exc``."""

    def __init__(self, what: str, exc: BaseException):
        super().__init__(f"{what}: {exc!r}")
        self.what = what
        self.exc = exc


class SourceMap:
    """Translates (generated module file, line) to (.lf file, line) with a graph.json
    ``line_map`` (entries ``[first, last, lf_file, lf_first]``: module lines first..last are
    lf_file lines lf_first..)."""

    def __init__(self, module_file: str | None, line_map: Iterable[tuple[int, int, str, int]]):
        self.module_file = _norm(module_file) if module_file else None
        self.ranges = sorted((int(a), int(b), f, int(c)) for a, b, f, c in line_map)
        self._starts = [r[0] for r in self.ranges]

    def translate(self, filename: str, lineno: int | None) -> Position:
        """``(filename, lineno)`` in .lf terms, or unchanged when not in the map (or when
        there is no line number)."""
        if lineno is None or self.module_file is None or _norm(filename) != self.module_file:
            return filename, lineno
        i = bisect.bisect_right(self._starts, lineno) - 1
        if i >= 0:
            a, b, f, c = self.ranges[i]
            if a <= lineno <= b:
                return f, c + lineno - a
        return filename, lineno

    def is_generated(self, filename: str) -> bool:
        """Whether ``filename`` is the generated module."""
        return self.module_file is not None and _norm(filename) == self.module_file


def _norm(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def _user_stack(
    tb: TracebackType | None, smap: SourceMap
) -> tuple[traceback.StackSummary, Position | None]:
    """Frames of ``tb`` outside the runtime, translated to .lf lines; and the innermost
    location inside the generated module (or None)."""
    frames: list[traceback.FrameSummary] = []
    where: Position | None = None
    text: str | None
    for fs in traceback.extract_tb(tb):
        if os.path.dirname(os.path.abspath(fs.filename)) == _RUNTIME_DIR:
            continue
        fname, line = smap.translate(fs.filename, fs.lineno)
        if smap.is_generated(fs.filename):
            where = (fname, line)
        if line is not None and fname != fs.filename:  # translated to a .lf line
            text = linecache.getline(fname, line).strip()
        else:
            text = fs.line
        frames.append(traceback.FrameSummary(fname, line, fs.name, line=text or None))
    return traceback.StackSummary.from_list(frames), where


def format_exception(exc: BaseException, smap: SourceMap) -> tuple[str, Position | None]:
    """The user-facing traceback text of ``exc`` (chained exceptions included) and the
    innermost .lf location ``(file, line)`` inside the generated module, or None."""
    te = traceback.TracebackException.from_exception(exc)
    where: Position | None = None
    seen: set[int] = set()
    cur: traceback.TracebackException | None = te
    cur_exc: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        assert cur_exc is not None  # the TracebackException chain mirrors the exception's
        seen.add(id(cur))
        cur.stack, w = _user_stack(cur_exc.__traceback__, smap)
        where = where or w
        if cur.__cause__ is not None:
            cur, cur_exc = cur.__cause__, cur_exc.__cause__
        elif cur.__context__ is not None and not cur.__suppress_context__:
            cur, cur_exc = cur.__context__, cur_exc.__context__
        else:
            cur = None
    return "".join(te.format()), where


def exit_status(exc: BaseException) -> int:
    """Process exit status for an exception that ended the program: ``n`` for
    ``SystemExit(n)`` (0 for None, 1 for a non-int code), 1 otherwise."""
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1
    return 1


def report(
    exc: BaseException,
    what: str,
    smap: SourceMap,
    fallback: Position | None = None,
    log: Log | None = None,
) -> int:
    """Print the failure of ``what`` (e.g. ``reaction 1 of Main.c``) to stderr and return the
    exit status. ``fallback`` is the (.lf file, line) to name when no frame of the generated
    module is in the traceback."""
    status = exit_status(exc)
    err = sys.stderr
    if isinstance(exc, SystemExit):
        where = _where(format_exception(exc, smap)[1] or fallback)
        if not isinstance(exc.code, (int, type(None))):
            # sys.exit("message"): the message is what the program has to say (status 1)
            err.write(f"{exc.code}\n")
            err.flush()
            return status
        if status != 0:
            err.write(f"ERROR: {what} exited with status {status}{where}\n")
        elif log is not None:
            log.log(f"---- {what} called exit(0){where}")
        err.flush()
        return status
    text, loc = format_exception(exc, smap)
    if fallback is None and not _has_user_frames(exc):
        # nothing from the program in the traceback: most likely a runtime bug; show it all
        what = f"{what} (internal error of the runtime)"
        text = "".join(traceback.format_exception(exc))
    err.write(f"FATAL: {what} failed{_where(loc or fallback)}\n{text}")
    err.flush()
    return status


def output_failed(exc: OSError, say: bool = True) -> int:
    """The program's standard output cannot be written (``exc``: a closed pipe, as with
    ``| head``, or a full device): say so on stderr (when ``say``), send the rest of the
    output nowhere (so that the interpreter's last flush does not fail again) and return
    the exit status, 1 (that of a Python program whose ``print`` failed)."""
    stdout = sys.__stdout__
    try:
        if stdout is not None:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
            os.close(devnull)
    except (OSError, ValueError):
        pass
    if say:
        sys.stderr.write(f"ERROR: cannot write the program's output: {exc.strerror or exc}\n")
        sys.stderr.flush()
    return 1


def is_output_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the runtime's own write of the program's output failing (a closed
    pipe or a full device), not an error of the program."""
    return (
        isinstance(exc, OSError)
        and exc.errno in (errno.EPIPE, errno.ENOSPC, errno.EDQUOT)
        and not _has_user_frames(exc)
    )


def load_failure_hook(module_file: str, graph_path: str) -> Callable[..., None]:
    """A ``sys.excepthook`` for the generated module ``module_file`` while it loads: an
    exception of its preambles (e.g. a failed import) is reported once, at its ``.lf`` line
    (read from ``graph_path``'s line map), as ``FATAL: loading the program failed at
    File.lf:N`` and the traceback in ``.lf`` terms; the interpreter then exits with status 1."""

    def hook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if not isinstance(exc, Exception):
            sys.__excepthook__(kind, exc, tb)
            return
        try:
            with open(graph_path, encoding="utf-8") as f:
                line_map = json.load(f)["line_map"]
        except (OSError, ValueError, KeyError, TypeError):
            line_map = []
        report(exc.with_traceback(tb), "loading the program", SourceMap(module_file, line_map))

    return hook


def _has_user_frames(exc: BaseException) -> bool:
    return any(
        os.path.dirname(os.path.abspath(fs.filename)) != _RUNTIME_DIR
        for fs in traceback.extract_tb(exc.__traceback__)
    )


def _where(loc: Position | None) -> str:
    return f" at {loc[0]}:{loc[1]}" if loc and loc[0] else ""
