"""What a snapshot holds of a running program, captured and restored at a tag boundary.

A snapshot is taken after a tag completed (its reactions ran, its mode transitions were
applied) and before the next one starts. One scheduler captures a *part*: what it holds of the
reactors it owns (all of them on one worker). A part is a plain dict:

- ``reactors``: instance full name -> the pickled state of the instance (bytes, one pickle per
  instance, so that objects shared inside a reactor, such as a torch optimiser and its model's
  parameters, stay shared);
- ``ports``: root channel name -> pickled value (a port's value persists across tags);
- ``actions``: action full name -> (value, the latest scheduled event as ``(elapsed ns,
  microstep, queued)`` or None), for ``value`` and ``min_spacing``;
- ``events``: pending events ``(kind, target name, elapsed ns, microstep, value)`` in queue
  order, ``kind`` ``"a"`` (action), ``"t"`` (timer) or ``"e"`` (entry of modes: the value is the
  ranks to trigger);
- ``modes``: modal instance name -> current mode and, per mode, whether it is active, was ever
  active, when it was left (elapsed ns) and its suspended events;
- ``deadlines``: rank -> deadline (ns) of the reactions that have one (``update_deadline``).

Times are kept relative to the start tag ("elapsed"), so that a resumed run, whose physical
start differs, keeps the logical times, and the digests, of the run it continues.

**A reactor's state.** By default, every attribute of the instance except the runtime's
(``_lf_...``, ``_bank_index``) and its parameters (``_p`` behind the read-only property ``p``):
its state variables and whatever its reactions stored on ``self``. A reactor class may define
both ``__getstate__(self)`` (returning any picklable value) and ``__setstate__(self, value)``
(called on the freshly built instance on resume, after its state initialisers ran) to choose
what is saved, e.g. an environment's state instead of the environment.
"""

from __future__ import annotations

import inspect
import pickle
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from ..core.action import Action
from ..core.mode import ModalState, Mode, _Entry
from ..core.pending import current
from ..core.timer import Timer

if TYPE_CHECKING:
    from ..core.assembly import Assembly, Instance
    from ..core.port import Port
    from ..core.scheduler import Scheduler

#: A part of a snapshot (see the module docstring).
Part = dict[str, Any]

_RUNTIME = ("_lf_", "_bank_index")
_PROTOCOL = 5


class SnapshotError(Exception):
    """A snapshot cannot be taken, read or resumed (the message says why)."""


# --------------------------------------------------------------------------- a reactor's state


def _custom(obj: object) -> bool:
    """Whether the reactor's class defines its own ``__getstate__``."""
    return type(obj).__getstate__ is not object.__getstate__


def _is_parameter(cls: type, key: str) -> bool:
    """Whether attribute ``key`` (``_p``) stores a parameter (read-only property ``p``)."""
    return key.startswith("_") and isinstance(inspect.getattr_static(cls, key[1:], None), property)


def reactor_state(obj: object) -> Any:
    """The state of a reactor instance: its ``__getstate__()`` if its class defines one,
    else a dict of its attributes without the runtime's and the parameters."""
    if _custom(obj):
        return obj.__getstate__()
    cls = type(obj)
    return {
        k: v
        for k, v in vars(obj).items()
        if not k.startswith(_RUNTIME) and not _is_parameter(cls, k)
    }


def set_reactor_state(obj: object, state: Any) -> None:
    """Restore what :func:`reactor_state` returned into a freshly built instance."""
    if _custom(obj):
        obj.__setstate__(state)  # type: ignore[attr-defined]
    else:
        vars(obj).update(state)


def check_savable(instances: Iterable[Instance]) -> None:
    """Pickle the state of every instance once, variable by variable.

    Raises:
        SnapshotError: naming the reactor and the state variable that cannot be pickled.
    """
    for inst in instances:
        obj = inst.obj
        if _custom(obj):
            if not hasattr(obj, "__setstate__"):
                raise SnapshotError(f"reactor {inst.name} defines __getstate__ but no __setstate__")
            _try_pickle(reactor_state(obj), f"reactor {inst.name}: the value of __getstate__()")
            continue
        for key, value in reactor_state(obj).items():
            _try_pickle(value, f"reactor {inst.name}: state variable '{key}'")


def _try_pickle(value: Any, what: str) -> None:
    try:
        pickle.dumps(value, protocol=_PROTOCOL)
    except Exception as e:
        raise SnapshotError(
            f"{what} cannot be saved in a checkpoint ({type(value).__name__}: {e}); "
            "make it picklable or define __getstate__/__setstate__ on the reactor"
        ) from None


def owned_instances(program: Assembly, owned: Collection[int] | None) -> list[Instance]:
    """The fully built instances of ``program`` that this scheduler runs (``owned``: their
    ids; None: all)."""
    return [
        inst
        for inst in program.instances
        if inst.obj is not None and (owned is None or inst.id in owned)
    ]


# --------------------------------------------------------------------------- capture


def capture(
    sched: Scheduler, instances: Iterable[Instance], ports: Iterable[Port], warn: set[str]
) -> Part:
    """The part of ``sched`` at its current tag boundary: the state of ``instances``, the
    values of ``ports``, its actions, pending events, modes and deadlines. A port value
    that cannot be pickled is left out (named once on the log; ``warn`` holds those named).

    Raises:
        SnapshotError: a reactor's state cannot be pickled.
    """
    program = sched.program
    start = sched.engine.start_time
    reactors = {}
    for inst in instances:
        try:
            reactors[inst.name] = pickle.dumps(reactor_state(inst.obj), protocol=_PROTOCOL)
        except Exception as e:
            raise SnapshotError(f"reactor {inst.name}: its state cannot be saved ({e})") from None
    return {
        "reactors": reactors,
        "ports": _port_values(ports, sched, warn),
        "actions": {a._name: (a._v, _last(a, start)) for a in program.actions},
        "events": [_event(e, start) for e in sorted(sched.queue.live())],
        "modes": {st.name: _modal(st, start) for st in program.modes.states},
        "deadlines": {
            r.rank: r.deadline
            for r in program.reactions
            if r is not None and r.deadline is not None
        },
    }


def _port_values(ports: Iterable[Port], sched: Scheduler, warn: set[str]) -> dict[str, bytes]:
    out = {}
    for p in ports:
        v = current(p)
        if v is None:
            continue
        try:
            out[p._name] = pickle.dumps(v, protocol=_PROTOCOL)
        except Exception as e:
            if p._name not in warn:
                warn.add(p._name)
                sched.log.warn(f"checkpoint: the value of port {p._name} is not saved ({e})")
    return out


def _last(a: Action, start: int) -> tuple[int, int, bool] | None:
    last = a._last
    if last is None:
        return None
    return last[0] - start, last[1], any(e is last for e in a._queue)


def _kind(target: object) -> tuple[str, str]:
    if isinstance(target, Action):
        return "a", target._name
    if isinstance(target, Timer):
        return "t", target._name
    return "e", ""


def _event(e: list, start: int) -> tuple[str, str, int, int, Any]:
    kind, name = _kind(e[3])
    return kind, name, e[0] - start, e[1], e[4]


def _modal(st: ModalState, start: int) -> dict[str, Any]:
    assert st.current is not None  # set when the run began
    return {
        "current": st.current.name,
        "modes": {
            name: (
                m.active,
                m.ever_active,
                m.leave_time - start,
                [(*_kind(tgt), t - start, mi, v) for tgt, t, mi, v in m.suspended],
            )
            for name, m in st.modes.items()
        },
    }


def merge(parts: Iterable[Part]) -> Part:
    """One part made of the parts of several workers (pending events in tag order)."""
    out: Part = {k: {} for k in ("reactors", "ports", "actions", "modes", "deadlines")}
    events: list = []
    for p in parts:
        for k in out:
            out[k].update(p[k])
        events += p["events"]
    events.sort(key=lambda ev: (ev[2], ev[3]))
    out["events"] = events
    return out


# --------------------------------------------------------------------------- restore


def restore(sched: Scheduler, part: Part, instances: Iterable[Instance]) -> None:
    """Put ``part`` (merged) into the freshly built reactors of ``sched``, whose engine is
    at the snapshot's tag (its start time set): the state of ``instances``, port and action
    values, the pending events of its own targets, modes and deadlines.

    Raises:
        SnapshotError: the part lacks the state of one of ``instances``.
    """
    program = sched.program
    start = sched.engine.start_time
    for inst in instances:
        blob = part["reactors"].get(inst.name)
        if blob is None:
            raise SnapshotError(f"the snapshot holds no state of reactor {inst.name}")
        set_reactor_state(inst.obj, pickle.loads(blob))
    for p in program.ports:
        blob = part["ports"].get(p._name)
        if blob is not None:
            p._v = pickle.loads(blob)
    targets = _targets(sched)
    if program.modes:
        program.modes._entry = _Entry(sched.rq)  # made by ModeSystem.begin in a fresh run
    _restore_events(sched, part["events"], targets, start)
    _restore_actions(program.actions, part["actions"], start)
    if program.modes:
        for st in program.modes.states:
            _restore_modal(st, part["modes"][st.name], targets, start)
    for rank, deadline in part["deadlines"].items():
        r = program.reactions[rank]
        if r is not None:
            r.deadline = deadline


def _targets(sched: Scheduler) -> dict[tuple[str, str], Any]:
    program = sched.program
    out: dict[tuple[str, str], Any] = {("a", a._name): a for a in program.actions}
    out.update({("t", t._name): t for t in program.timers})
    return out


def _restore_events(
    sched: Scheduler, events: list, targets: dict[tuple[str, str], Any], start: int
) -> None:
    """Queue the events whose targets this scheduler has (an entry of modes: whose ranks
    are its reactions)."""
    queue, reactions = sched.queue, sched.program.reactions
    entry = sched.program.modes._entry
    for kind, name, t, m, value in events:
        if kind == "e":
            if entry is None or reactions[value[0]] is None:
                continue
            queue.push(start + t, m, entry, value)
            continue
        target = targets.get((kind, name))
        if target is None:
            continue
        e = queue.push(start + t, m, target, value)
        if kind == "a":
            target._queue.append(e)


def _restore_actions(actions: Iterable[Action], saved: dict[str, Any], start: int) -> None:
    for a in actions:
        if a._name not in saved:
            continue
        a._v, last = saved[a._name]
        if last is None:
            continue
        t, m, queued = last
        found = [e for e in a._queue if e[0] == start + t and e[1] == m] if queued else []
        a._last = found[0] if found else [start + t, m, -1, None, None]


def _restore_modal(
    st: ModalState, saved: dict[str, Any], targets: dict[tuple[str, str], Any], start: int
) -> None:
    st.current = st.modes[saved["current"]]
    st.request = None
    for name, (active, ever, leave, suspended) in saved["modes"].items():
        mode: Mode = st.modes[name]
        mode.active, mode.ever_active = active, ever
        mode.leave_time = start + leave
        mode.suspended = [(targets[(k, n)], start + t, m, v) for k, n, t, m, v in suspended]
