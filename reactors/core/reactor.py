"""``ReactorBase``, the base class of every generated reactor class, and ``Make`` (spec §2.6).

Attributes whose names start with ``_lf_`` are reserved for the runtime and generated code
(LF names cannot start with ``__``; parameter ``p`` is stored as ``self._p``).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from .context import CTX
from .reaction import Reaction


class Make:
    """A plain attribute bag: ``Make(out=port)``; used for contained-reactor capsules
    (``c.out``) and available to user code (spec §2.1)."""

    def __init__(self, **attrs: Any):
        self.__dict__.update(attrs)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"Make({inner})"


def _running_reaction() -> Reaction | None:
    return CTX.sched.current


class ReactorBase:
    """Base class of generated reactor classes.

    ``__init__(name, bank_index, params)`` stores each parameter ``p`` as ``self._p`` (exposed
    read-only by ``p = ReactorBase.parameter("p")``), sets ``self.bank_index`` (read-only;
    a parameter named ``bank_index`` in ``params`` overrides it), keeps the full instance name
    (:meth:`lf_reactor_full_name`) and calls ``self._lf_init_state()``.
    """

    bank_index = property(attrgetter("_bank_index"), doc="Index in the bank (0 if not a bank).")

    def __init__(self, name: str, bank_index: int, params: dict[str, Any]):
        self._lf_name = name
        self._bank_index = bank_index
        self._lf_param_names = tuple(params)
        for key, value in params.items():
            setattr(self, "_" + key, value)
        self._lf_init_state()

    def lf_parameters(self) -> dict[str, Any]:
        """The instance's parameter values, name -> value, in declaration order (those of the
        main reactor include any given on the program's command line)."""
        return {name: getattr(self, "_" + name) for name in self._lf_param_names}

    def lf_reactor_full_name(self) -> str:
        """The instance's full name, as in LF's ``lf_reactor_full_name(self)``: the main
        reactor's name and each containing instance's name, dot-separated, with bank indices
        (``"CartPolePPO.envs[1]"``). Stable across runs, worker counts and backends, so it can
        seed a reactor's own random generator."""
        return self._lf_name

    def lf_reactor_name(self) -> str:
        """The instance's own name, as in LF's ``lf_reactor_name(self)``: the last part of
        :meth:`lf_reactor_full_name` (``"envs[1]"``; for the main reactor, its name)."""
        return self._lf_name.rpartition(".")[2]

    @staticmethod
    def parameter(name: str) -> property:
        """A read-only property returning ``self._<name>``; assignment raises AttributeError."""
        return property(attrgetter("_" + name), doc=f"parameter {name} (read-only)")

    def _lf_init_state(self) -> None:
        """Initialise state variables (generated classes override this)."""

    def _lf_reset_state(self, mode: str | None) -> None:
        """Re-initialise ``reset state`` variables of ``mode`` (None: all); generated code
        overrides this (spec §3.12)."""

    def check_deadline(self, invoke_deadline_handler: bool = True) -> bool:
        """True iff the currently executing reaction has a deadline D and physical time is
        past logical time + D; if so and ``invoke_deadline_handler``, its deadline handler runs
        now, inside the reaction. False for a reaction without a deadline (spec §2.6)."""
        r = _running_reaction()
        return False if r is None else r.check_deadline(bool(invoke_deadline_handler))

    def update_deadline(self, t: float) -> None:
        """Set the deadline (ns, int or float, >= 0) of the currently executing reaction, for
        this and later invocations. ValueError if negative; no effect outside a reaction
        that has a deadline."""
        if t < 0:
            raise ValueError(f"update_deadline(): negative deadline {t}")
        r = _running_reaction()
        if r is not None:
            r.deadline = int(t)

    def register_user_trace_event(self, description: str) -> int:
        """Register a user trace event; returns a non-zero handle (user events are not recorded:
        the timing trace holds reactions only)."""
        CTX.trace_handles += 1
        return CTX.trace_handles

    def tracepoint_user_event(self, handle: int) -> None:
        """Record a user trace event (a no-op: the timing trace holds reactions only)."""

    def tracepoint_user_value(self, handle: int, value: int) -> None:
        """Record a user trace value (a no-op: the timing trace holds reactions only)."""
