"""What the program model's reactions name: channels and ports (:class:`ChannelKey`,
:class:`PortKey`), the triggers, sources and effects of a reaction (references, :data:`Ref`)
and the arguments its function takes (:data:`Arg`), with their JSON forms.

Part of the program model (:mod:`reactors.model.program`, docs/PROGRAM.md): references and
arguments are tagged unions, each case carrying ``"kind"`` in JSON
(:mod:`reactors.model.json_form`); the keys are JSON arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, NamedTuple

from ..core.errors import ProgramFormatError
from .json_form import Mismatch, decode

# --------------------------------------------------------------------------- enumerations


class Transition(StrEnum):
    """How a mode is entered: its ``reset state`` re-initialised, or resumed (``history``)."""

    RESET = "reset"
    HISTORY = "history"


class Builtin(StrEnum):
    """Triggers that every reactor has."""

    STARTUP = "startup"
    SHUTDOWN = "shutdown"
    RESET = "reset"


# --------------------------------------------------------------------------- keys


class ChannelKey(NamedTuple):
    """One channel of a port: ``(reactor id, port name, channel index)``; JSON ``[r, p, i]``."""

    reactor: int
    port: str
    index: int  # type: ignore[assignment]  # shadows tuple.index; graph.json names it so


class PortKey(NamedTuple):
    """A port as a whole: ``(reactor id, port name)``; JSON ``[r, p]``."""

    reactor: int
    port: str


# --------------------------------------------------------------------------- references


@dataclass(frozen=True)
class BuiltinTrigger:
    """``startup``, ``shutdown`` or ``reset`` as a trigger."""

    KINDS: ClassVar[tuple[str, ...]] = tuple(Builtin)
    kind: Builtin


@dataclass(frozen=True)
class TimerRef:
    """A timer of the reaction's own reactor."""

    KINDS: ClassVar[tuple[str, ...]] = ("timer",)
    name: str


@dataclass(frozen=True)
class ActionRef:
    """An action of the reaction's own reactor."""

    KINDS: ClassVar[tuple[str, ...]] = ("action",)
    name: str


@dataclass(frozen=True)
class PortRef:
    """A port of ``reactor`` (the reaction's own reactor or a contained one), all channels."""

    KINDS: ClassVar[tuple[str, ...]] = ("port",)
    reactor: int
    name: str


@dataclass(frozen=True)
class ModeRef:
    """A mode of the reaction's own reactor (an effect: the reaction may switch to it)."""

    KINDS: ClassVar[tuple[str, ...]] = ("mode",)
    name: str
    transition: Transition


#: A trigger, source or effect of a reaction.
Ref = BuiltinTrigger | TimerRef | ActionRef | PortRef | ModeRef


# --------------------------------------------------------------------------- arguments


@dataclass(frozen=True)
class PortArg:
    """A port of ``reactor`` passed as itself (a Port, or a list of channels for a multiport)."""

    KINDS: ClassVar[tuple[str, ...]] = ("port",)
    name: str
    reactor: int
    port: str


@dataclass(frozen=True)
class MutableArg:
    """An input passed as a ``mutable`` copy: ``.value`` is a deep copy per reaction."""

    KINDS: ClassVar[tuple[str, ...]] = ("mutable",)
    name: str
    reactor: int
    port: str


@dataclass(frozen=True)
class ActionArg:
    """An action of the own reactor, passed as ``name``."""

    KINDS: ClassVar[tuple[str, ...]] = ("action",)
    name: str
    action: str


@dataclass(frozen=True)
class ContainedArg:
    """A contained instance, as an object with one attribute per port in ``ports``."""

    KINDS: ClassVar[tuple[str, ...]] = ("contained",)
    name: str
    reactor: int
    ports: tuple[str, ...]


@dataclass(frozen=True)
class BankArg:
    """A contained bank, as a list (one per member) of objects with the ``ports``."""

    KINDS: ClassVar[tuple[str, ...]] = ("bank",)
    name: str
    reactors: tuple[int, ...]
    ports: tuple[str, ...]


@dataclass(frozen=True)
class BankPortsArg:
    """One port of every member of a contained bank, as a list."""

    KINDS: ClassVar[tuple[str, ...]] = ("bank_ports",)
    name: str
    reactors: tuple[int, ...]
    port: str


@dataclass(frozen=True)
class ModeArg:
    """A mode of the own reactor, to switch to with ``transition``."""

    KINDS: ClassVar[tuple[str, ...]] = ("mode",)
    name: str
    mode: str
    transition: Transition


@dataclass(frozen=True)
class ChannelsArg:
    """A list of single channels (the ``src``/``dst`` of a ``_lf_forward`` reaction)."""

    KINDS: ClassVar[tuple[str, ...]] = ("channels",)
    name: str
    channels: tuple[ChannelKey, ...]


#: One parameter of a reaction function (after ``self``).
Arg = (
    PortArg | MutableArg | ActionArg | ContainedArg | BankArg | BankPortsArg | ModeArg | ChannelsArg
)

#: The function name of the synthetic reactions that forward a connection inside a mode.
FORWARD = "_lf_forward"


def decode_refs(items: object) -> tuple[Ref, ...]:
    """Triggers, sources or effects from their JSON form (``[{"kind": "port", ...}]``).

    Raises:
        ProgramFormatError: an item of an unknown kind or shape.
    """
    try:
        return decode(tuple[Ref, ...], items, "refs")
    except Mismatch as e:
        raise ProgramFormatError("<references>", str(e)) from None


def decode_args(items: object) -> tuple[Arg, ...]:
    """Reaction arguments from their JSON form (``[{"name": ..., "kind": ...}]``).

    Raises:
        ProgramFormatError: an item of an unknown kind or shape.
    """
    try:
        return decode(tuple[Arg, ...], items, "args")
    except Mismatch as e:
        raise ProgramFormatError("<arguments>", str(e)) from None
