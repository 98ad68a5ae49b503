"""Learning curves, drawn with matplotlib in a helper process that a run starts early, and
several runs' curves in one figure (:func:`draw_overlay`, for ``lf-rl plot``).

Importing matplotlib's pyplot takes 0.25-0.4 s here, and drawing a curve ~0.1 s: on a short
run (CartPole solves in ~5 s) that is several percent of its wall time, spent while a core
often idles. A logger therefore calls :func:`start` when the run begins: a child process
(``python -m rl_algos.plotter``) imports matplotlib on the other core meanwhile and then
waits for requests on its standard input, one JSON line each, answering ``ok`` or
``error ...`` on its standard output once the PNG is written. :func:`draw` sends one and
waits for the answer, so the file is complete on disk when the run ends, as if drawn in
process; where there is no helper (not started, failed, or too slow to answer), the curve is
drawn in this process instead. The helper ends when its standard input closes (the run's
process exits: :func:`stop` at exit, or the kernel closing the pipe) or when its parent dies;
a Ctrl-C to the process group leaves it to the run (it ignores SIGINT and SIGHUP).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import IO, Any

#: Seconds :func:`draw` waits for the helper's answer before drawing in this process.
ANSWER_TIMEOUT_S = 60.0
#: Seconds between the helper's checks that its parent still lives.
PARENT_POLL_S = 0.1

_lock = threading.Lock()
_helper: subprocess.Popen | None = None


def start() -> None:
    """Start this process's helper (once; later calls do nothing). Never raises: without a
    helper, :func:`draw` draws in process."""
    global _helper
    with _lock:
        if _helper is not None:
            return
        try:
            _helper = subprocess.Popen(
                [sys.executable, "-m", "rl_algos.plotter", str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                encoding="utf-8",
            )
        except OSError:
            return
        atexit.register(stop)


def stop() -> None:
    """Close the helper's input and wait for it to end (killed after 2 s); idempotent."""
    global _helper
    with _lock:
        helper, _helper = _helper, None
    if helper is None:
        return
    with contextlib.suppress(OSError):
        helper.stdin.close()  # type: ignore[union-attr]
    try:
        helper.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()
    with contextlib.suppress(OSError):
        helper.stdout.close()  # type: ignore[union-attr]


@dataclass(frozen=True)
class Curve:
    """A learning curve: the ``returns`` of the episodes that ended at environment steps
    ``steps`` (same length), the moving mean of the last ``window`` of them, the ``target``
    return (a dashed line, when given), the plot's ``title`` and the PNG file ``png_path``."""

    steps: Sequence[int]
    returns: Sequence[float]
    window: int
    png_path: str
    title: str = ""
    target: float | None = None


def draw(curve: Curve) -> str:
    """Write ``curve`` into its PNG file (see :func:`draw_curve`), by the helper when there
    is one, else in this process. Returns the file's path. Raises what matplotlib raises
    when drawn here (e.g. OSError for an unwritable path)."""
    request: dict[str, Any] = dict(
        steps=[int(s) for s in curve.steps],
        returns=[float(r) for r in curve.returns],
        window=int(curve.window),
        png_path=os.path.abspath(curve.png_path),
        title=curve.title,
        target=None if curve.target is None else float(curve.target),
    )
    if _by_helper(request):
        return curve.png_path
    with _collector_paused():
        return draw_curve(pyplot(), Curve(**request))


def _by_helper(request: dict[str, Any]) -> bool:
    """Whether the helper drew ``request`` (False: no helper, or it failed or took more than
    ``ANSWER_TIMEOUT_S``; a helper that did not answer is stopped)."""
    with _lock:
        helper = _helper
        if helper is None or helper.poll() is not None:
            return False
        out: IO[str] = helper.stdout  # type: ignore[assignment]
        try:
            helper.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
            helper.stdin.flush()  # type: ignore[union-attr]
            ready, _, _ = select.select([out], [], [], ANSWER_TIMEOUT_S)
            answer = out.readline() if ready else ""
        except (OSError, ValueError):
            answer = ""
    if answer.strip() == "ok":
        return True
    if not answer:
        stop()
    return False


def draw_curve(plt: ModuleType, curve: Curve) -> str:
    """Draw ``curve`` with ``plt`` (pyplot): the return of each episode against the
    environment steps at which it ended, the moving mean of the last ``window`` returns, the
    target return as a dashed line; save it as a 7x4 inch, 100 dpi PNG at its ``png_path``.
    Returns that path."""
    steps, returns, window, target = curve.steps, curve.returns, curve.window, curve.target
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot(steps, returns, ".", ms=3, alpha=0.35, label="episode return")
    if returns:
        means: list[float] = []
        acc: deque[float] = deque(maxlen=window)
        for r in returns:
            acc.append(r)
            means.append(sum(acc) / len(acc))
        ax.plot(steps, means, "-", lw=2, label=f"mean of last {window}")
    if target is not None:
        ax.axhline(target, color="grey", ls="--", lw=1, label=f"target {target:g}")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("return")
    ax.set_title(curve.title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(curve.png_path)
    plt.close(fig)
    return curve.png_path


@dataclass(frozen=True)
class Line:
    """One curve of an :class:`Overlay`: ``y`` against ``x`` (same length), named ``label``."""

    label: str
    x: Sequence[float]
    y: Sequence[float]


@dataclass(frozen=True)
class Overlay:
    """Several runs' curves in one figure: ``lines``, the x axis's name ``xlabel``, the PNG
    (or any file matplotlib writes by its suffix: .svg, .pdf) ``png_path``, a ``title``."""

    lines: Sequence[Line]
    xlabel: str
    png_path: str
    title: str = ""
    ylabel: str = "return"


def draw_overlay(plt: ModuleType, overlay: Overlay) -> str:
    """Draw every line of ``overlay`` with ``plt`` (pyplot), in matplotlib's colour cycle,
    with a legend of their labels; save it as a 8x4.5 inch, 100 dpi figure at its
    ``png_path``. Returns that path.

    Raises:
        ValueError: the suffix of ``png_path`` names no format matplotlib writes.
        OSError: the file cannot be written.
    """
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    try:
        for line in overlay.lines:
            ax.plot(line.x, line.y, "-", lw=1.8, label=line.label)
        ax.set_xlabel(overlay.xlabel)
        ax.set_ylabel(overlay.ylabel)
        ax.set_title(overlay.title)
        ax.grid(alpha=0.3)
        if overlay.lines:
            ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        fig.savefig(overlay.png_path)
    finally:
        plt.close(fig)
    return overlay.png_path


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (imported on the first call)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection meanwhile: a figure makes enough objects to start a full
    collection, which takes 0.2-0.3 s in a process with torch loaded (at a run's end, when
    the user waits)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _end_with(parent: int) -> None:
    """Exit at once when ``parent`` (a pid) is no longer this process's parent."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """The helper: ``python -m rl_algos.plotter PARENT_PID``. Imports pyplot, then draws each
    request read from standard input until it closes. It ignores SIGINT and SIGHUP: a
    Ctrl-C or a hang-up of the terminal reaches the whole process group, and the run it
    belongs to stops on them, draws its last curve and then ends the helper."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    args = sys.argv[1:] if argv is None else argv
    threading.Thread(target=_end_with, args=(int(args[0]),), daemon=True).start()
    plt = pyplot()
    for line in sys.stdin:
        try:
            draw_curve(plt, Curve(**json.loads(line)))
            answer = "ok"
        except Exception as e:  # noqa: BLE001 - the parent draws it itself and reports
            answer = f"error {e!r}"
        print(answer, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
