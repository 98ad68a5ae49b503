"""The runtime's public module: what generated modules import, and all they import.

``from reactors.api import *`` (spec §2.1, §2.7) gives reaction code ``lf``, the namespace of
runtime calls (``lf.time.logical()``, ``lf.tag()``, ``lf.request_stop()``,
``lf.stop_signalled()``...), and the time helpers and classes it uses directly (``__all__``).
Calls that need the running program read :data:`reactors.core.context.CTX`.

A generated module reaches the runtime through this module alone: its own scaffolding (its
start before its imports, its load-failure hook, its ``main``, its end) calls the underscored
functions at the end of this module, each of which imports the layer that does the work only
when it is called. A program may also import
``reactors.api.CheckpointPolicy``, the policy its ``lf_checkpoint_policy`` method returns
(:class:`reactors.records.checkpoint_policy.Policy`, loaded on first use).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

from .core.action import Action as action_capsule_t
from .core.context import CTX
from .core.port import Port as port_capsule
from .core.reactor import Make, ReactorBase
from .core.tag import (
    BILLION,
    DAY,
    DAYS,
    FOREVER,
    HOUR,
    HOURS,
    MINUTE,
    MINUTES,
    MSEC,
    MSECS,
    NEVER,
    NSEC,
    NSECS,
    SEC,
    SECS,
    USEC,
    USECS,
    WEEK,
    WEEKS,
    Tag,
    instant_t,
    interval_t,
    tag_compare,
)

if TYPE_CHECKING:  # the public name, typed; at run time __getattr__ below imports it on demand
    from .records.checkpoint_policy import Policy as CheckpointPolicy  # noqa: F401

__all__ = [
    "lf",
    "Tag",
    "request_stop",
    "get_fed_maxwait",
    "set_fed_maxwait",
    "BILLION",
    "FOREVER",
    "NEVER",
    "instant_t",
    "interval_t",
    "NSEC",
    "NSECS",
    "USEC",
    "USECS",
    "MSEC",
    "MSECS",
    "SEC",
    "SECS",
    "MINUTE",
    "MINUTES",
    "HOUR",
    "HOURS",
    "DAY",
    "DAYS",
    "WEEK",
    "WEEKS",
    "Make",
    "ReactorBase",
    "action_capsule_t",
    "port_capsule",
]


def request_stop() -> None:
    """Request the program to stop at the next microstep (spec §3.9); from any thread."""
    CTX.sched.request_stop()


def stop_signalled() -> bool:
    """Whether a signal (Ctrl-C, SIGTERM, SIGHUP) asked the run to stop: it stops at the next
    tag, after its shutdown reactions, so a reaction in a long computation (a learner's
    update) may cut it short and return; what the current tag computes after the signal is
    not part of the run's determinism. A read of one flag (from any thread). Always False
    in a run that records or replays."""
    return CTX.sched.stop_signalled()


def get_fed_maxwait() -> NoReturn:
    """Federated execution only: always raises RuntimeError (spec §2.7)."""
    raise RuntimeError("get_fed_maxwait() is only available in a decentralized federated program")


def set_fed_maxwait(t: int) -> NoReturn:
    """Federated execution only: always raises RuntimeError (spec §2.7)."""
    raise RuntimeError("set_fed_maxwait() is only available in a decentralized federated program")


class _Time:
    """``lf.time``: logical and physical clocks in ns (spec §2.7)."""

    @staticmethod
    def logical() -> int:
        """Current logical time, ns since the epoch."""
        return CTX.sched.time

    @staticmethod
    def logical_elapsed() -> int:
        """Current logical time minus the start time, ns."""
        s = CTX.sched
        return s.time - s.start_time

    @staticmethod
    def physical() -> int:
        """Physical (wall-clock) time, ns since the epoch."""
        return CTX.sched.physical_time()

    @staticmethod
    def physical_elapsed() -> int:
        """Physical time minus the start time, ns."""
        s = CTX.sched
        return s.physical_time() - s.start_time

    @staticmethod
    def start() -> int:
        """The start time (origin of logical and physical elapsed time), ns since the epoch."""
        return CTX.sched.start_time


#: The tag class, for annotations inside :class:`_LF` (where ``Tag`` is an attribute).
_TagClass = Tag


class _LF:
    """The ``lf`` namespace of reaction code (spec §2.7)."""

    time = _Time()
    Tag = Tag
    tag_compare = staticmethod(tag_compare)
    request_stop = staticmethod(request_stop)
    stop_signalled = staticmethod(stop_signalled)
    get_fed_maxwait = staticmethod(get_fed_maxwait)
    set_fed_maxwait = staticmethod(set_fed_maxwait)

    @staticmethod
    def tag() -> _TagClass:
        """The current tag as a :class:`Tag`."""
        s = CTX.sched
        return Tag(s.time, s.micro)

    @staticmethod
    def source_directory() -> str:
        """Absolute directory of the main .lf file."""
        return CTX.source_directory

    @staticmethod
    def package_directory() -> str:
        """The project root (parent of the nearest ``src``/``lf_src`` directory)."""
        return CTX.package_directory

    @staticmethod
    def run_id() -> str:
        """This run's id: 32 hex digits, the same in every reactor and worker of one run and
        different in every other run (``rl_algos.runlog.run_directory`` names directories
        with it)."""
        return CTX.run_id

    @staticmethod
    def main_parameters() -> dict[str, Any]:
        """The main reactor's parameter values, name -> value, in declaration order, those
        given on the command line included: the same in every reactor and worker of a run,
        so reactors agree on what depends on them (``rl_algos.runlog.run_directory`` names
        a run's directory with its ``env_id`` and ``seed``) without exchanging messages. A
        new dict at each call (its values are the parameters' own objects); empty before
        the program is built."""
        return dict(CTX.main_parameters)

    @staticmethod
    def forwarded_parameters() -> dict[str, str]:
        """The parameters of reactors inside the main one that the command line gives
        (``--learner.hidden '[128, 128]'``, those a resumed run keeps included), as
        ``"PATH.NAME"`` -> the LF expression given (text, as written): the same in every
        reactor and worker of a run (``rl_algos.record`` keeps them in ``config.json``). A new
        dict at each call; empty when none is given, and before the program is built."""
        return dict(CTX.forwarded)

    @staticmethod
    def check_deadline(reactor: ReactorBase, invoke_deadline_handler: bool = True) -> bool:
        """``reactor.check_deadline(invoke_deadline_handler)``."""
        return ReactorBase.check_deadline(reactor, invoke_deadline_handler)

    @staticmethod
    def update_deadline(reactor: ReactorBase, t: float) -> None:
        """``reactor.update_deadline(t)``."""
        ReactorBase.update_deadline(reactor, t)

    @staticmethod
    def register_user_trace_event(reactor: ReactorBase, description: str) -> int:
        """``reactor.register_user_trace_event(description)`` (non-zero handle)."""
        return ReactorBase.register_user_trace_event(reactor, description)

    @staticmethod
    def tracepoint_user_event(reactor: ReactorBase, handle: int) -> None:
        """``reactor.tracepoint_user_event(handle)`` (stub)."""

    @staticmethod
    def tracepoint_user_value(reactor: ReactorBase, handle: int, value: int) -> None:
        """``reactor.tracepoint_user_value(handle, value)`` (stub)."""


lf = _LF()


# ------------------------------------------------------------ what a generated module calls


def _load_failure_hook(
    module_file: str, graph_path: str, worker: bool = False
) -> Callable[..., None]:
    """The generated module's ``sys.excepthook`` while it loads: an exception of its
    preambles is reported at its ``.lf`` line (:func:`reactors.core.errors.load_failure_hook`)."""
    from .core.errors import load_failure_hook

    return load_failure_hook(module_file, graph_path, worker)


def _run_before_import(path: str, build_id: str, argv: Sequence[str]) -> int | None:
    """Run a program on worker processes before its module's imports; its exit status, or
    None when the module runs it itself
    (:func:`reactors.launch.before_import.run_before_import`)."""
    from .launch.before_import import run_before_import

    return run_before_import(path, build_id, argv)


def _freeze_heap() -> None:
    """Called once the generated module has loaded: the objects alive now leave the cyclic
    collector's work, which is turned on again (:func:`reactors.core.scheduler.freeze_heap`)."""
    from .core.scheduler import freeze_heap

    freeze_heap()


def _main(module: ModuleType, graph_path: str, argv: Sequence[str]) -> int:
    """Run the program of ``module`` described by ``graph_path`` with the options ``argv``;
    its exit status (:func:`reactors.launch.main.main`)."""
    from .launch.main import main

    return main(module, graph_path, argv)


def _end_process(status: int) -> NoReturn:
    """End the program's process with exit status ``status`` (0-255) without the
    interpreter's tear-down of its modules (:func:`reactors.core.process_end.end_process`)."""
    from .core.process_end import end_process

    end_process(status)


def __getattr__(name: str) -> Any:
    """``CheckpointPolicy``, imported when a program first asks for it (it costs the start of
    every other program several milliseconds); AttributeError for any other unknown name."""
    if name == "CheckpointPolicy":
        from .records.checkpoint_policy import Policy

        return Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
