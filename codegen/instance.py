"""The elaborated program: reactor instances, their ports, timers, actions and reactions.

Produced by :mod:`codegen.elaborate`, read (never changed) by :mod:`codegen.analyse`, written
out by :mod:`codegen.emit`. Times are nanoseconds. A channel is
``(instance id, port name, channel index)``; a plain port has one channel, 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reactors.core.reaction import reaction_number

from . import tree
from .classes import ReactorClass

Channel = tuple[int, str, int]


@dataclass(frozen=True)
class BuiltinRef:
    """A built-in trigger of a reaction: ``kind`` is "startup", "shutdown" or "reset"."""

    kind: str

    def to_json(self) -> dict:
        """The JSON form of docs/PROGRAM.md: ``{"kind": "startup"}``."""
        return {"kind": self.kind}


@dataclass(frozen=True)
class PortRef:
    """Port ``name`` of instance ``reactor`` (an id), as a trigger, source or effect."""

    reactor: int
    name: str

    def to_json(self) -> dict:
        """``{"kind": "port", "reactor": id, "name": port}``."""
        return {"kind": "port", "reactor": self.reactor, "name": self.name}


@dataclass(frozen=True)
class ActionRef:
    """Action ``name`` of the reaction's own instance."""

    name: str

    def to_json(self) -> dict:
        """``{"kind": "action", "name": action}``."""
        return {"kind": "action", "name": self.name}


@dataclass(frozen=True)
class TimerRef:
    """Timer ``name`` of the reaction's own instance."""

    name: str

    def to_json(self) -> dict:
        """``{"kind": "timer", "name": timer}``."""
        return {"kind": "timer", "name": self.name}


@dataclass(frozen=True)
class ModeRef:
    """A mode of the reaction's own instance as an effect; ``transition`` is "reset" or
    "history"."""

    name: str
    transition: str

    def to_json(self) -> dict:
        """``{"kind": "mode", "name": mode, "transition": transition}``."""
        return {"kind": "mode", "name": self.name, "transition": self.transition}


#: What a reaction's trigger, source or effect refers to.
Ref = BuiltinRef | PortRef | ActionRef | TimerRef | ModeRef


@dataclass(frozen=True)
class PortInst:
    name: str
    kind: str  # "input" | "output"
    width: int  # -2 for a plain port
    mutable: bool

    @property
    def channels(self) -> int:
        return 1 if self.width < 0 else self.width


@dataclass(frozen=True)
class TimerInst:
    name: str
    offset: int
    period: int
    mode: str | None


@dataclass(frozen=True)
class ActionInst:
    name: str
    origin: str
    min_delay: int
    min_spacing: int | None
    policy: str
    mode: str | None


@dataclass(eq=False)
class ReactionInst:
    """One reaction of one instance. ``triggers``/``sources``/``effects`` are resolved
    references (:data:`Ref`); ``args`` are the JSON-ready dicts of docs/PROGRAM.md. Levels,
    ranks and inferred deadlines are not here: :class:`codegen.analyse.Analysis` holds them."""

    id: int
    owner: Instance
    index: int
    node: tree.Reaction | None  # None for a synthetic forwarding reaction
    mode: str | None
    function: str
    triggers: list[Ref] = field(default_factory=list)
    sources: list[Ref] = field(default_factory=list)
    effects: list[Ref] = field(default_factory=list)
    args: list[dict] = field(default_factory=list)
    deadline: int | None = None
    deadline_function: str | None = None
    file: str = ""
    line: int = 0

    def describe(self) -> str:
        """``reaction 2 of Main.a`` (numbered by :func:`reactors.core.reaction.reaction_number`)."""
        name = f" '{self.node.name}'" if self.node is not None and self.node.name else ""
        return f"reaction {reaction_number(self.index)}{name} of {self.owner.name}"


@dataclass(eq=False)
class Instance:
    """One reactor instance (a bank member counts as one)."""

    id: int
    name: str
    short: str
    cls: ReactorClass
    parent: Instance | None
    bank_index: int
    bank_width: int
    mode: str | None
    params: dict
    params_fn: str
    site: tree.Instantiation | None
    synthetic: str | None = None
    ports: dict[str, PortInst] = field(default_factory=dict)
    children: dict[str, list[Instance]] = field(default_factory=dict)
    timers: list[TimerInst] = field(default_factory=list)
    actions: list[ActionInst] = field(default_factory=list)
    reactions: list[ReactionInst] = field(default_factory=list)
    worker: int = 0

    def channels(self, port: str) -> list[Channel]:
        return [(self.id, port, c) for c in range(self.ports[port].channels)]


@dataclass(frozen=True)
class ConnectionView:
    """A connection as written (port level), for the graph viewer."""

    container: int
    lhs: tuple[tuple[int, str], ...]
    rhs: tuple[tuple[int, str], ...]
    delay: int | None
    physical: bool
    iterated: bool
    line: int
    label: str | None


@dataclass
class Elaborated:
    """The whole instantiated program."""

    instances: list[Instance]
    reactions: list[ReactionInst]
    edges: list[tuple[Channel, Channel]]
    connections: list[ConnectionView]
    sites: dict[str, tuple]  # params function name -> (Child | None, class, fixed dict | None)
