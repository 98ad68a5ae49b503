"""Reaction instances (spec §2.1, §2.8, §3.5, §3.7) and their dispatch entries.

Each reaction is reduced at build time to a dispatch entry ``(callable, args)`` stored at
its rank in the scheduler's table, so the per-reaction work is one ``fn(*args)``. A plain
reaction's entry is its bound body and a prebuilt argument tuple. A reaction that needs a
check first (a deadline, an enclosing mode, mutable inputs) gets ``(reaction.invoke, ())``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from .clock import Clock
from .mode import Mode
from .port import Port, mutable_view

#: A dispatch entry: a callable and the argument tuple to call it with.
Entry = tuple[Callable[..., Any], tuple[Any, ...]]


class ReactionHost(Protocol):
    """What a reaction with checks needs from the scheduler that runs it: the clock, the
    current tag's time (ns), whether shutdown reactions are running, and the running reaction
    that has a deadline (for ``check_deadline``)."""

    clock: Clock
    stopping: bool
    current: Reaction | None

    @property
    def time(self) -> int: ...


def reaction_number(index: int) -> int:
    """The number a person sees for the reaction at 0-based ``index`` in its reactor.

    LF numbers the reactions of a reactor from 1, inherited ones first, as its diagrams show;
    diagrams, compile errors and run-time errors all number them with this function. Generated
    names (``reaction_function_<index>``) and graph.json's ``index`` stay 0-based.
    """
    return index + 1


def reaction_index(number: int) -> int:
    """The 0-based index of the reaction a person calls ``reaction <number>``; the inverse
    of :func:`reaction_number`."""
    return number - 1


def forward(src: Sequence[Port], dst: Sequence[Port]) -> Callable[..., None]:
    """The body of a mode-local connection reaction (``_lf_forward``, PROGRAM.md).

    ``src`` and ``dst`` are equal-length sequences of channel :class:`Port` objects; each
    present source channel's value is set on the matching destination channel.
    """
    pairs = tuple(zip(src, dst))

    def _lf_forward(*_args: object) -> None:
        for s, d in pairs:
            if s._p:
                d.set(s.value)

    return _lf_forward


class Reaction:
    """One reaction of one reactor instance, ready to run.

    Attributes: ``rank`` (dense position in the priority order), ``index`` and ``name`` as in
    graph.json, ``owner`` (full instance name), ``body``/``handler`` (bound functions),
    ``args`` (argument tuple), ``deadline`` (ns or None), ``mode`` (nearest enclosing
    :class:`reactors.core.mode.Mode` or None), ``mutable`` (positions in ``args`` to replace with a
    fresh deep-copy view per invocation), ``is_shutdown`` (triggered by ``shutdown``),
    ``file``/``line`` (the ``.lf`` position).
    """

    __slots__ = (
        "rank",
        "index",
        "name",
        "owner",
        "body",
        "handler",
        "args",
        "deadline",
        "mode",
        "mutable",
        "is_shutdown",
        "file",
        "line",
        "cur_args",
        "_sched",
    )

    def __init__(
        self,
        *,
        index: int,
        name: str | None,
        owner: str,
        body: Callable[..., Any],
        args: Iterable[Any],
        handler: Callable[..., Any] | None = None,
        deadline: int | None = None,
        mode: Mode | None = None,
        mutable: Iterable[int] = (),
        is_shutdown: bool = False,
        file: str = "",
        line: int = 0,
    ):
        self.rank = -1
        self.index = index
        self.name = name
        self.owner = owner
        self.body = body
        self.handler = handler
        self.args = tuple(args)
        self.deadline = deadline
        self.mode = mode
        self.mutable = tuple(mutable)
        self.is_shutdown = is_shutdown
        self.file = file
        self.line = line
        self.cur_args: Sequence[Any] = self.args
        self._sched: ReactionHost = None  # type: ignore[assignment]  # set when a scheduler attaches the program

    @property
    def is_plain(self) -> bool:
        """True when the body can be called directly with the static argument tuple."""
        return self.deadline is None and self.mode is None and not self.mutable

    def entry(self) -> Entry:
        """The dispatch entry ``(callable, args)`` for the scheduler's table."""
        if not self.is_plain:
            return self.invoke, ()
        fn = self.body
        func, obj = getattr(fn, "__func__", None), getattr(fn, "__self__", None)
        if func is not None and obj is not None:  # a bound method: call the function directly
            return func, (obj, *self.args)
        return fn, self.args

    def describe(self) -> str:
        """Human-readable identity for messages: ``reaction 2 (name) of Main.c[1]``."""
        label = f"reaction {reaction_number(self.index)}" + (f" ({self.name})" if self.name else "")
        return f"{label} of {self.owner}"

    def invoke(self) -> None:
        """Run the reaction with its checks: enclosing mode active (shutdown reactions of
        ever-active modes excepted, spec §3.9), fresh mutable-input copies, and the deadline
        (the handler runs instead of the body when ``D == 0`` or physical > logical + D,
        spec §3.7)."""
        mode = self.mode
        s = self._sched
        if mode is not None and not mode.active:
            if not (self.is_shutdown and s.stopping and mode.ever_active):
                return
        args: tuple[Any, ...] | list[Any] = self.args
        if self.mutable:
            args = list(args)
            for i in self.mutable:
                args[i] = mutable_view(args[i])
        d = self.deadline
        if d is None:
            self.body(*args)
            return
        self.cur_args = args
        prev = s.current
        s.current = self
        try:
            if d == 0 or s.clock.now() > s.time + d:
                self.handler(*args)  # type: ignore[misc]  # build gives every deadline a handler
            else:
                self.body(*args)
        finally:
            s.current = prev

    def check_deadline(self, invoke_handler: bool) -> bool:
        """Whether this (running) reaction's deadline is missed now; optionally run the
        handler at once (spec §2.6 ``check_deadline``)."""
        s = self._sched
        d = self.deadline
        if d is None or not s.clock.now() > s.time + d:
            return False
        if invoke_handler:
            self.handler(*self.cur_args)  # type: ignore[misc]  # build gives every deadline a handler
        return True

    def __repr__(self) -> str:
        return f"<{self.describe()} rank={self.rank}>"
