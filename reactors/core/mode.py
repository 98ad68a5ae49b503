"""Modal reactors (spec §2.5, §3.12): modes, transitions, suspension and resumption.

Every element (reaction, timer, action) has a *nearest enclosing mode*: its own ``mode`` if it
is declared in one, else the mode that (transitively) contains its reactor instance, else
None. A mode is active iff it is its reactor's current mode and its own enclosing mode is
active. Transitions requested with ``M.set()`` are applied by :meth:`ModeSystem.apply` after
all reactions of a tag ran.
"""

from __future__ import annotations

from heapq import heappush
from typing import Any, Protocol

from .event_queue import Event, EventQueue


class EventTarget(Protocol):
    """A target of queued events that a mode suspends and resumes (an action or a timer)."""

    def _resume(self, time: int, micro: int, value: Any, /) -> None: ...

    def _forget(self, e: Event, /) -> None: ...


class ModeTimer(EventTarget, Protocol):
    """A timer as its enclosing mode sees it: ``offset`` (ns) and ``start(time, micro)``."""

    offset: int

    def start(self, time: int, micro: int, /) -> None: ...


class TransitionHost(Protocol):
    """What modes need from the scheduler that runs them: its reaction queue ``rq`` (a heap
    of ranks), the transitions requested in the current tag, its event queue and the tag."""

    rq: list[int]
    transitions: list[ModalState]
    queue: EventQueue

    @property
    def time(self) -> int: ...

    @property
    def micro(self) -> int: ...

    @property
    def start_time(self) -> int: ...


class Mode:
    """One mode of one modal reactor instance.

    ``state``: the owning :class:`ModalState`; ``enclosing``: the owner instance's enclosing
    mode. ``startup``/``reset`` hold ranks of reactions (enclosing mode == this mode) triggered
    by ``startup``/``reset``; ``timers`` the timers whose enclosing mode is this one.
    ``suspended`` holds ``(target, time, micro, value)`` of events removed when the mode was
    left; ``leave_time`` (ns) is when that happened.
    """

    __slots__ = (
        "name",
        "state",
        "enclosing",
        "active",
        "ever_active",
        "leave_time",
        "suspended",
        "startup",
        "reset",
        "timers",
        "nested",
    )

    def __init__(self, name: str, state: ModalState, enclosing: Mode | None):
        self.name = name
        self.state = state
        self.enclosing = enclosing
        self.active = False
        self.ever_active = False
        self.leave_time = 0
        self.suspended: list[tuple[EventTarget, int, int, Any]] = []
        self.startup: list[int] = []
        self.reset: list[int] = []
        self.timers: list[ModeTimer] = []
        self.nested: list[Mode] = []  # modes whose enclosing chain passes through this one

    def within(self, other: Mode) -> bool:
        """True iff ``other`` is this mode or one of its enclosing modes."""
        m: Mode | None = self
        while m is not None:
            if m is other:
                return True
            m = m.enclosing
        return False

    def __repr__(self) -> str:
        return f"<mode {self.state.name}.{self.name}{' active' if self.active else ''}>"


class ModalState:
    """The modes of one modal reactor instance, its current mode and pending request."""

    __slots__ = (
        "name",
        "instance",
        "modes",
        "initial",
        "current",
        "request",
        "kind",
        "order",
        "nested_instances",
    )

    def __init__(self, name: str, instance: Any, order: int):
        self.name = name
        self.instance = instance
        self.modes: dict[str, Mode] = {}
        self.initial: Mode | None = None
        self.current: Mode | None = None
        self.request: Mode | None = None
        self.kind: str | None = None
        self.order = order
        # mode name -> instances nested (transitively) inside it
        self.nested_instances: dict[str, list[Any]] = {}


class ModeCapsule:
    """What a reaction gets for a mode effect ``reset(M)``/``history(M)``/``M`` (spec §2.5).

    ``M.set()`` requests the transition; it takes effect after the current tag (last ``set``
    in a tag wins).
    """

    __slots__ = ("_state", "_mode", "_kind", "_sched")

    def __init__(self, state: ModalState, mode: Mode, kind: str):
        if kind not in ("reset", "history"):
            raise ValueError(f"unknown mode transition '{kind}'")
        self._state = state
        self._mode = mode
        self._kind = kind
        self._sched: TransitionHost = None  # type: ignore[assignment]  # set when a scheduler attaches the program

    def set(self) -> None:
        """Request the transition to this mode at the end of the current tag."""
        st = self._state
        if st.request is None:
            self._sched.transitions.append(st)
        st.request = self._mode
        st.kind = self._kind

    def __repr__(self) -> str:
        return f"<mode capsule {self._kind}({self._mode.name})>"


class _Entry:
    """Event target that triggers reactions of newly entered modes at (t, m+1)."""

    __slots__ = ("_rq",)
    mode = None

    def __init__(self, rq: list[int]):
        self._rq = rq

    def _fire(self, e: Event) -> None:
        for rank in e[4]:
            heappush(self._rq, rank)


class ModeSystem:
    """All modal reactor instances of a program, in instance order (parents first)."""

    def __init__(self, states: list[ModalState], modes: list[Mode]):
        self.states = states
        self.modes = modes
        self._entry: _Entry | None = None

    def __bool__(self) -> bool:
        return bool(self.modes)

    def refresh(self) -> None:
        """Recompute every mode's ``active`` flag (parents are ordered before children)."""
        for m in self.modes:
            m.active = m.state.current is m and (m.enclosing is None or m.enclosing.active)

    def begin(self, sched: TransitionHost) -> list[int]:
        """Initial modes at start: mark them, suspend timers of inactive modes, and return
        the ranks of startup reactions of active modes."""
        self._entry = _Entry(sched.rq)
        for st in self.states:
            st.current = st.initial
        self.refresh()
        ranks: list[int] = []
        for m in self.modes:
            if m.active:
                m.ever_active = True
                ranks += m.startup
            else:
                m.leave_time = sched.start_time
                m.suspended = [(t, sched.start_time + t.offset, 0, None) for t in m.timers]
        return ranks

    def apply(self, sched: TransitionHost) -> None:
        """Apply the transitions requested during the tag that just completed (spec §3.12)."""
        t, m = sched.time, sched.micro
        requests = sorted(sched.transitions, key=lambda st: st.order)
        sched.transitions.clear()
        before = [mode.active for mode in self.modes]
        targets: list[Mode] = []
        for st in requests:
            target, kind = st.request, st.kind
            assert target is not None  # a state is in ``transitions`` only once it has a request
            st.request = None
            st.current = target
            if kind == "reset":
                targets.append(target)
        reset: set[Mode] = set()
        for target in targets:  # after all requests: a hierarchical reset wins over nested ones
            reset.add(target)
            reset.update(target.nested)
            _reset_state(target.state, target)
        self.refresh()
        for mode, was in zip(self.modes, before):
            if was and (not mode.active or mode in reset):
                self._suspend(sched, mode, t)
        ranks: list[int] = []
        for mode, was in zip(self.modes, before):
            if mode in reset:
                ranks += self._reset_events(sched, mode, t, m)
            elif mode.active and not was:
                self._resume(sched, mode, t, m)
            if mode.active and not mode.ever_active:
                mode.ever_active = True
                ranks += mode.startup
        if ranks:
            sched.queue.push(t, m + 1, self._entry, tuple(ranks))

    def _suspend(self, sched: TransitionHost, mode: Mode, t: int) -> None:
        mode.leave_time = t
        for e in sched.queue.remove_if(lambda tgt: tgt.mode is mode):
            tgt = e[3]
            tgt._forget(e)
            mode.suspended.append((tgt, e[0], e[1], e[4]))

    def _reset_events(self, sched: TransitionHost, mode: Mode, t: int, m: int) -> list[int]:
        """Discard suspended events; restart timers (if the mode is now active) or park them
        as if never started. Returns the ranks of reset reactions to run."""
        mode.suspended = []
        if not mode.active:
            mode.leave_time = t
            mode.suspended = [(tm, t + tm.offset, 0, None) for tm in mode.timers]
            return []
        for tm in mode.timers:
            tm.start(t, m + 1)
        return list(mode.reset)

    def _resume(self, sched: TransitionHost, mode: Mode, t: int, m: int) -> None:
        """History entry: re-queue suspended events with their remaining delay."""
        events, mode.suspended = mode.suspended, []
        for tgt, et, _em, value in events:
            remaining = et - mode.leave_time
            nt, nm = (t + remaining, 0) if remaining > 0 else (t, m + 1)
            tgt._resume(nt, nm, value)


def _reset_state(st: ModalState, target: Mode) -> None:
    """Hierarchical reset: state of the mode, nested reactors back to initial modes and
    their ``reset state`` variables re-initialised."""
    st.instance._lf_reset_state(target.name)
    for inst in st.nested_instances.get(target.name, ()):
        inst._lf_reset_state(None)
    for nested in target.nested:
        nested.state.current = nested.state.initial
