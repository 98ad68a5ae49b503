"""Errors of the runtime and how a failure is reported to the user (spec §2.9).

A failing reaction is reported on stderr with the reactor instance, the reaction and the
``.lf`` file:line, followed by the user's traceback: frames of the runtime itself are dropped
and lines of the generated module are translated to ``.lf`` lines through graph.json's
``line_map``.
"""

from __future__ import annotations

import bisect
import contextlib
import glob
import hashlib
import json
import linecache
import os
import select
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from ..native import MODULES
from .context import scratch_file
from .log import Log
from .log import say as _say

#: The runtime's package folder: a frame of a module anywhere below it is the runtime's.
_RUNTIME_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE = os.path.basename(_RUNTIME_DIR)

#: A source position ``(file, line)``; the line is None where Python has none.
Position = tuple[str, int | None]


class LaunchError(Exception):
    """The program cannot start: bad command-line options or an unreadable graph."""


class ClusterError(Exception):
    """The cluster named by ``--cluster`` cannot run the program: none is running at the
    address, it has no room for the workers, or it placed a worker where the run's transport
    cannot reach it. The message says which and what to do."""


class GraphError(LaunchError):
    """graph.json is malformed or does not match the generated module (PROGRAM.md)."""


class ProgramFormatError(GraphError):
    """A graph.json of another format version or shape than :mod:`reactors.model.program` reads.

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


#: The exit status of a run interrupted by Ctrl-C (128 + SIGINT), as a shell reports it.
STATUS_INTERRUPTED = 128 + signal.SIGINT

#: How long a run stopped by a signal may take to reach its stop tag and run its shutdown
#: reactions before it is stopped at once, s.
STOP_GRACE_S = 2.0

#: What is said when a signal stops a run (without the ``----``), by signal.
STOP_MESSAGES = {
    signal.SIGINT: "Interrupted (Ctrl-C)",
    signal.SIGTERM: STOP_SIGNALS[signal.SIGTERM],
    signal.SIGHUP: STOP_SIGNALS[signal.SIGHUP],
}


class StopSignals:
    """A context in which SIGINT, SIGTERM and SIGHUP stop the run as ``request_stop()`` does
    (at the next tag, after its shutdown reactions), which LF does on these signals.

    The first such signal is seen by a watcher thread (through ``signal.set_wakeup_fd``, so
    even while a reaction holds the main thread in a long computation): it sets
    :attr:`status` to 128 + the signal's number, says ``---- <what>; stopping.`` on ``log``
    at once and calls ``request(status)`` (from the watcher thread). A second signal, or the
    end of ``grace_s`` seconds without the context left (a reaction that does not return),
    is a hard stop: the main thread raises KeyboardInterrupt (SIGINT) or :class:`Signalled`, as outside
    this context, as soon as it runs Python code again (signals that arrive during one long
    call of C code count as one). Off the main thread (where signals cannot be handled) it
    does nothing.
    """

    def __init__(self, request: Callable[[int], None], log: Log, grace_s: float = STOP_GRACE_S):
        self.request = request
        self.log = log
        self.grace_s = grace_s
        self.status: int | None = None
        self._calls = self._seen = 0  # handler calls; signals the watcher read
        self._late = False  # the stop outlived its grace period
        self._saved: dict[int, Any] = {}
        self._wakeup = -1
        self._fds: tuple[int, int] | None = None
        self._watcher: threading.Thread | None = None

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._fds = (r, w)
        self._main = threading.get_ident()
        self._watcher = threading.Thread(target=self._watch, name="lf-signals", daemon=True)
        self._watcher.start()
        self._wakeup = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        self._saved = {s: signal.signal(s, self._handler) for s in STOP_MESSAGES}
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fds is None:
            return
        for s, h in self._saved.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        signal.set_wakeup_fd(self._wakeup)
        r, w = self._fds
        os.close(w)  # the watcher reads the end of the pipe and returns
        if self._watcher is not None:
            self._watcher.join()
        os.close(r)
        self._fds = None

    def _handler(self, signum: int, frame: Any) -> None:
        """In the main thread, once or more per signal: a hard stop from the second on."""
        self._calls += 1
        if self._calls >= 2 or self._seen >= 2 or self._late:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise Signalled(128 + signum, STOP_MESSAGES[signal.Signals(signum)])

    def _watch(self) -> None:
        """The watcher thread: the first signal is said and asks the stop; if the run has
        not ended ``grace_s`` later, the main thread is signalled again (a hard stop)."""
        assert self._fds is not None
        r = self._fds[0]
        deadline = None
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                if not select.select([r], [], [], left)[0]:
                    self._give_up()
                    deadline = None
                    continue
                data = os.read(r, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum not in STOP_MESSAGES:
                    continue
                self._seen += 1
                if self.status is None:
                    self.status = 128 + signum
                    deadline = time.monotonic() + self.grace_s
                    try:
                        self.log.info(f"---- {STOP_MESSAGES[signal.Signals(signum)]}; stopping.")
                    finally:  # whatever saying it did, the stop is asked
                        self.request(self.status)

    def _give_up(self) -> None:
        assert self.status is not None
        self._late = True
        try:
            self.log.info(
                f"---- The run did not stop within {self.grace_s:g} s of the signal; stopping now."
            )
        finally:
            signal.pthread_kill(self._main, self.status - 128)


class RecordError(Exception):
    """A file of the run's records (its digest, its timing trace) cannot be written; the
    message names the file and the system's reason (:func:`cannot_write`). What was written
    before stays whole (:mod:`reactors.parallel.worker_records`)."""


def cannot_write(path: str, exc: OSError) -> str:
    """``cannot write PATH: REASON``, the reason as the system says it (``No space left on
    device``)."""
    return f"cannot write {path}: {exc.strerror or exc}"


def say_once(run_id: str, text: str) -> bool:
    """Whether this worker is the first of the run ``run_id`` to say ``text``: workers that
    fail alike (each cannot write its part of one file on a full disk) say it once. A marker
    file of the run (:func:`reactors.core.context.scratch_file`) claims it (removed by
    :func:`forget_said`); True when it cannot be made, so that the text is still said."""
    return _claim(scratch_file(run_id, f"said-{hashlib.sha256(text.encode()).hexdigest()[:16]}"))


def forget_said(run_id: str) -> None:
    """Remove the markers of :func:`say_once` of the run ``run_id`` (at its end)."""
    for path in glob.glob(glob.escape(scratch_file(run_id, "said-")) + "*"):
        with contextlib.suppress(OSError):
            os.unlink(path)


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
        if _in_runtime(fs.filename):
            continue
        fname, line = smap.translate(fs.filename, fs.lineno)
        name = fs.name
        if smap.is_generated(fs.filename):
            where = (fname, line)
            name = _generated_name(name)
        if line is not None and fname != fs.filename:  # translated to a .lf line
            text = linecache.getline(fname, line).strip()
        else:
            text = fs.line
        frames.append(traceback.FrameSummary(fname, line, name, line=text or None))
    return traceback.StackSummary.from_list(frames), where


def _in_runtime(filename: str) -> bool:
    """Whether a frame of ``filename`` is the runtime's: a module of this package (of any of
    its layers), by its absolute path, or one compiled by mypyc, which names it by its path
    relative to the project (``reactors/parallel/worker_scheduler.py``)."""
    if os.path.abspath(filename).startswith(_RUNTIME_DIR + os.sep):
        return True
    parts = os.path.normpath(filename).removesuffix(".py").split(os.sep)
    return not os.path.isabs(filename) and parts[0] == _PACKAGE and ".".join(parts[1:]) in MODULES


def _generated_name(name: str) -> str:
    """A function of the generated module as the user knows it: ``reaction_function_1`` is
    ``reaction 2`` (as the report's header and the diagram number it), its deadline
    handler ``deadline handler of reaction 2``; other names unchanged."""
    from .reaction import reaction_number

    for prefix, said in _GENERATED:
        index = name.removeprefix(prefix)
        if index != name and index.isdigit():
            return f"{said}{reaction_number(int(index))}"
    return name


#: The generated module's function names for a reaction's body and deadline handler (with
#: the reaction's 0-based index after them), and what a traceback calls them.
_GENERATED = (
    ("reaction_function_", "reaction "),
    ("deadline_function_", "deadline handler of reaction "),
)


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
    module is in the traceback. An exception whose ``show_traceback`` attribute is False (a
    library's error about a value, e.g. :class:`rl_algos.config.ConfigError`) is one line."""
    status = exit_status(exc)
    if isinstance(exc, SystemExit):
        where = _where(format_exception(exc, smap)[1] or fallback)
        if not isinstance(exc.code, (int, type(None))):
            # sys.exit("message"): the message is what the program has to say (status 1)
            _say(f"{exc.code}\n")
            return status
        if status != 0:
            _say(f"ERROR: {what} exited with status {status}{where}\n")
        elif log is not None:
            log.log(f"---- {what} called exit(0){where}")
        return status
    text, loc = format_exception(exc, smap)
    if getattr(exc, "show_traceback", True) is False:  # its message says all (a bad value)
        _say(f"ERROR: {what} failed{_where(loc or fallback)}: {exc}\n")
        return status
    if fallback is None and not has_user_frames(exc):
        # nothing from the program in the traceback: most likely a runtime bug; show it all
        what = f"{what} (internal error of the runtime)"
        text = "".join(traceback.format_exception(exc))
    _say(f"FATAL: {what} failed{_where(loc or fallback)}\n{text}")
    return status


def load_failure_hook(
    module_file: str, graph_path: str, worker: bool = False
) -> Callable[..., None]:
    """A ``sys.excepthook`` for the generated module ``module_file`` while it loads: an
    exception of its preambles (e.g. a failed import) is reported once, at its ``.lf`` line
    (read from ``graph_path``'s line map), as ``FATAL: loading the program failed at
    File.lf:N`` and the traceback in ``.lf`` terms, from the first frame at a ``.lf`` line;
    the interpreter then exits with status 1.

    ``worker``: the module is loading in a worker process that ``multiprocessing`` spawned
    (as ``__mp_main__``); only the first worker of the run whose load fails reports it (the
    others fail alike and exit silently), and it leaves :func:`load_failure_marker` for the
    supervisor, which then adds nothing."""

    def hook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        if not isinstance(exc, Exception):
            sys.__excepthook__(kind, exc, tb)
            return
        if worker and not _claim(load_failure_marker(os.getppid())):
            return
        try:
            with open(graph_path, encoding="utf-8") as f:
                line_map = json.load(f)["line_map"]
        except (OSError, ValueError, KeyError, TypeError):
            line_map = []
        smap = SourceMap(module_file, line_map)
        report(exc.with_traceback(_from_lf_line(tb, smap)), "loading the program", smap)

    return hook


def load_failure_marker(supervisor: int) -> str:
    """The file whose existence says that a worker of the run supervised by process
    ``supervisor`` (its pid) reported the failure of loading the program."""
    return os.path.join(tempfile.gettempdir(), f"lf-load-failed-{supervisor}")


def _claim(path: str) -> bool:
    """Create ``path`` if it does not exist: True for the one caller that created it (or
    when it cannot be created at all, so that the failure is still said)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    except OSError:
        pass
    return True


def _from_lf_line(tb: TracebackType | None, smap: SourceMap) -> TracebackType | None:
    """``tb`` without its leading entries up to the first at a ``.lf`` line (those of
    ``multiprocessing``'s spawn and of the generated module's own scaffolding, such as a
    ``class`` line); all of it if no entry is at one."""
    cur = tb
    while cur is not None:
        code = cur.tb_frame.f_code
        if smap.is_generated(code.co_filename):
            fname, _ = smap.translate(code.co_filename, cur.tb_lineno)
            if fname != code.co_filename:
                return cur
        cur = cur.tb_next
    return tb


def has_user_frames(exc: BaseException) -> bool:
    """Whether ``exc``'s traceback has a frame outside the runtime (the program's code)."""
    return any(not _in_runtime(fs.filename) for fs in traceback.extract_tb(exc.__traceback__))


def _where(loc: Position | None) -> str:
    return f" at {loc[0]}:{loc[1]}" if loc and loc[0] else ""
