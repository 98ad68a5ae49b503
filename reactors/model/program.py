"""The program model: the elaborated program as frozen dataclasses, and its JSON form.

The compiler (``lfc``) builds a :class:`Program` and writes it as ``graph.json``
(:meth:`Program.dumps`); the runtime, placement, the graph viewer and the tests read it back
(:meth:`Program.load`). docs/PROGRAM.md documents every field. All times are integer
nanoseconds; a reactor's ``id`` is its index in :attr:`Program.reactors`.

The JSON form is versioned (:data:`FORMAT_VERSION`). Reading checks the version, every field's
presence and type, and rejects unknown fields, so a graph.json written by another version of
``lfc`` (or by hand, wrongly) fails with a :class:`~reactors.core.errors.ProgramFormatError` that
names the file and the offending field instead of failing later in the runtime.

The JSON form follows the fields (:mod:`reactors.model.json_form`): enums are their values, tuples
are lists, the small tuple records (:class:`Channel`, :class:`LineRange`, and the keys of
:mod:`reactors.model.references`) are JSON arrays, and references and arguments
(:mod:`reactors.model.references`) carry a ``"kind"`` tag.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from ..core.errors import GraphError, ProgramFormatError
from .arguments import Argument
from .json_form import Mismatch, added, decode, encode, key
from .references import Arg, ChannelKey, PortKey, Ref
from .target import TargetSettings

#: Version of the JSON form written by :meth:`Program.dumps` and accepted by :meth:`Program.load`.
FORMAT_VERSION = 4
#: ``width`` of a plain port (not a multiport); it has exactly one channel, index 0.
PLAIN_WIDTH = -2


# --------------------------------------------------------------------------- enumerations


class PortKind(StrEnum):
    """Whether a port is an input or an output of its reactor."""

    INPUT = "input"
    OUTPUT = "output"


class Origin(StrEnum):
    """Whether an action is logical (scheduled by reactions) or physical (any thread)."""

    LOGICAL = "logical"
    PHYSICAL = "physical"


class Policy(StrEnum):
    """What ``schedule`` does with an event closer than ``min_spacing`` to the previous one."""

    DEFER = "defer"
    DROP = "drop"
    REPLACE = "replace"
    UPDATE = "update"


class Synthetic(StrEnum):
    """The kind of instance the compiler adds to lower ``after`` (delay) and ``~>``."""

    DELAY = "delay"
    PHYSICAL_DELAY = "physical_delay"


# --------------------------------------------------------------------------- tuple records


class LineRange(NamedTuple):
    """Generated-module lines ``first..last`` are lines ``line..`` of ``.lf`` file ``file``."""

    first: int
    last: int
    file: str
    line: int


# --------------------------------------------------------------------------- declarations


@dataclass(frozen=True, kw_only=True)
class MainParameter:
    """A parameter of the main reactor, for the program's ``--help``: ``type`` is the declared
    type's text (None: none declared); ``default`` the value's ``.lf`` text after any
    ``lfc -D``; ``file``/``line`` where it is declared (the main file or a superclass's);
    ``fixed``: what fixes its value at compile time (a width, a timer period...), so that it
    can only change with ``lfc -D``; "" when it may be given on the program's command line."""

    name: str
    type: str | None
    default: str
    file: str
    line: int
    fixed: str = ""
    doc: str = field(default="", metadata=added())  # one line from the .lf doc comment


@dataclass(frozen=True, kw_only=True)
class ContainedParameter:
    """A parameter of the reactor instances at ``path`` inside the main reactor, for the
    program's ``--help`` and its command line (``--PATH.NAME VALUE``): ``path`` is their
    names below the main reactor without bank indexes (``learner``; ``envs`` for every member
    of the bank ``envs``; ``a.b``), ``members`` how many instances it names, ``class_name``
    their reactor class. ``default`` is the value's ``.lf`` text at the instantiation (its
    argument, else the class's default); ``declared`` the class's default, whose kind a value
    must have; ``type``, ``file``/``line`` (the parameter's declaration), ``fixed`` and
    ``doc`` are as for :class:`MainParameter` (``fixed``: "" when it may be given when the
    program starts)."""

    path: str
    name: str
    class_name: str = field(metadata=key("class"))
    type: str | None
    default: str
    declared: str
    file: str
    line: int
    members: int = 1
    fixed: str = ""
    doc: str = ""

    @property
    def option(self) -> str:
        """``PATH.NAME``, as the command line writes it after ``--``."""
        return f"{self.path}.{self.name}"


@dataclass(frozen=True, kw_only=True)
class PortSpec:
    """A port of one instance; ``width`` is the number of channels, or :data:`PLAIN_WIDTH`."""

    name: str
    kind: PortKind
    width: int = PLAIN_WIDTH
    mutable: bool = False

    @property
    def channels(self) -> int:
        """How many channels the port has (1 for a plain port)."""
        return 1 if self.width == PLAIN_WIDTH else self.width


@dataclass(frozen=True, kw_only=True)
class TimerSpec:
    """``timer name(offset, period)`` in ns; ``mode``: the reactor's mode holding it."""

    name: str
    offset: int = 0
    period: int = 0
    mode: str | None = None


@dataclass(frozen=True, kw_only=True)
class ActionSpec:
    """``logical|physical action name(min_delay, min_spacing, policy)``; times in ns,
    ``min_spacing`` None means no spacing (not 0)."""

    name: str
    origin: Origin = Origin.LOGICAL
    min_delay: int = 0
    min_spacing: int | None = None
    policy: Policy = Policy.DEFER
    mode: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModeSpec:
    """A mode of a modal reactor; ``initial`` for the one it starts in."""

    name: str
    initial: bool = False


# --------------------------------------------------------------------------- the program


@dataclass(frozen=True, kw_only=True)
class ReactionSpec:
    """One reaction of one instance. ``index`` is 0-based within its reactor (inherited
    reactions first); ``rank`` is the total priority order; ``deadline`` in ns."""

    id: int
    reactor: int
    index: int
    name: str | None = None
    label: str | None = None
    function: str
    deadline: int | None = None
    deadline_function: str | None = None
    mode: str | None = None
    triggers: tuple[Ref, ...] = ()
    sources: tuple[Ref, ...] = ()
    effects: tuple[Ref, ...] = ()
    args: tuple[Arg, ...] = ()
    level: int = 0
    inferred_deadline: int | None = None
    rank: int = 0
    file: str = ""
    line: int = 0


@dataclass(frozen=True, kw_only=True)
class ReactorInstance:
    """One reactor instance (a bank member is one). ``parent`` is None for the main reactor;
    ``params`` names the module function ``(parent, bank_index) -> dict``; ``mode`` is the
    parent's mode holding the instance; ``worker`` its placement, ``pin`` the ``n`` of an
    ``@worker(n)`` attribute, ``node`` the label of a ``@node("label")`` attribute (the Ray
    resource its worker's node must have with ``--cluster``, also for the reactors inside
    it); ``reactions`` the ids of its reactions in index order."""

    id: int
    name: str
    short: str
    class_name: str = field(metadata=key("class"))
    pyclass: str
    parent: int | None
    bank_index: int = 0
    bank_width: int = 1
    params: str | None = None
    mode: str | None = None
    synthetic: Synthetic | None = None
    file: str = ""
    line: int = 0
    label: str | None = None
    worker: int = 0
    pin: int | None = None
    node: str | None = None
    ports: tuple[PortSpec, ...] = ()
    timers: tuple[TimerSpec, ...] = ()
    actions: tuple[ActionSpec, ...] = ()
    modes: tuple[ModeSpec, ...] = ()
    reactions: tuple[int, ...] = ()

    def port(self, name: str) -> PortSpec | None:
        """The port called ``name``, or None."""
        return next((p for p in self.ports if p.name == name), None)


class Channel(NamedTuple):
    """A zero-delay connection of channel ``src`` to channel ``dst``; JSON ``[*src, *dst]``."""

    src_reactor: int
    src_port: str
    src_index: int
    dst_reactor: int
    dst_port: str
    dst_index: int

    @property
    def src(self) -> ChannelKey:
        """The writing end ``(reactor, port, channel index)``."""
        return ChannelKey(*self[:3])

    @property
    def dst(self) -> ChannelKey:
        """The reading end ``(reactor, port, channel index)``."""
        return ChannelKey(*self[3:])


@dataclass(frozen=True, kw_only=True)
class Connection:
    """A connection as written in ``container`` (port level, for the viewer); ``delay`` in ns
    of ``after`` (None without one)."""

    sources: tuple[PortKey, ...] = field(metadata=key("from"))
    destinations: tuple[PortKey, ...] = field(metadata=key("to"))
    delay: int | None = None
    physical: bool = False
    iterated: bool = False
    container: int
    line: int = 0
    label: str | None = None


@dataclass(frozen=True)
class Prediction:
    """The predicted time per tag (ns) of a program on ``workers`` workers."""

    workers: int
    ns_per_tag: int


@dataclass(frozen=True)
class WorkerChoice:
    """What the latest ``-w 0`` run chose (that run writes it into graph.json; the compiler
    writes none): ``workers``, ``reason`` (one line), ``predicted`` (each worker count it
    weighed), ``placement`` (the worker of each reactor id; empty: the rules' placement) and
    ``inputs`` (a digest of what the choice was made from:
    :func:`reactors.parallel.costs.inputs_key`; a later run with the same inputs takes the choice as
    it is)."""

    workers: int
    reason: str
    predicted: tuple[Prediction, ...] = ()
    placement: tuple[int, ...] = ()
    inputs: str = field(default="", metadata=added())


@dataclass(frozen=True)
class NodePlacement:
    """Where one worker of a ``--cluster`` run ran: its Ray node id, the node's address and
    host name."""

    node_id: str
    address: str
    host: str


@dataclass(frozen=True)
class ClusterRun:
    """Where the latest ``--cluster`` run's workers ran (that run writes it into graph.json;
    the compiler writes none): ``nodes[w]`` for worker ``w``, ``placement`` the worker of each
    reactor id, ``sent_bytes[w]`` what worker ``w`` sent to other nodes over the network
    transport (:mod:`reactors.cluster.net`; empty when the run was on one node or did not
    finish)."""

    nodes: tuple[NodePlacement, ...]
    placement: tuple[int, ...]
    sent_bytes: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Program:
    """The whole elaborated program (graph.json). ``reactors``: parents before children,
    index == id; ``channels``: every zero-delay connection at channel level (after lowering);
    ``connections``: as written, for the viewer; ``line_map``: generated module to ``.lf``."""

    name: str
    main_file: str = ""
    source_directory: str = ""
    package_directory: str = ""
    module: str = ""
    target: TargetSettings = TargetSettings()
    reactors: tuple[ReactorInstance, ...]
    reactions: tuple[ReactionSpec, ...]
    channels: tuple[Channel, ...] = ()
    connections: tuple[Connection, ...] = ()
    line_map: tuple[LineRange, ...] = ()
    main_parameters: tuple[MainParameter, ...] = ()
    # Parameters of the instances inside main, settable as --PATH.NAME VALUE
    contained_parameters: tuple[ContainedParameter, ...] = field(default=(), metadata=added())
    # Parameters given on the command line (``--seed 3``, ``--learner.device cpu``: the name
    # of a contained one is its option, PATH.NAME); the compiler writes none.
    arguments: tuple[Argument, ...] = ()
    # Shared with the generated module's ``BUILD_ID``: a module and a graph.json from two
    # different builds are refused at launch ("" accepts any module).
    build_id: str = ""
    # The choice of the latest -w 0 run, and why (reactors.parallel.costs.explain)
    worker_choice: WorkerChoice | None = None
    # Where the latest --cluster run's workers ran (reactors.cluster.ray_transport)
    cluster_run: ClusterRun | None = None
    # Declared `federated reactor`: each top-level instance is a federate
    # (reactors.parallel.placement.federates); it runs as one program unless on a cluster
    federated: bool = False

    @property
    def physical_actions(self) -> bool:
        """Whether any reactor has a physical action (``~>`` connections included)."""
        return any(a.origin is Origin.PHYSICAL for r in self.reactors for a in r.actions)

    def ancestors(self, ids: Iterable[int]) -> set[int]:
        """The reactor ids ``ids`` and those of all their containers (what a worker builds to
        run them)."""
        out: set[int] = set()
        for start in ids:
            i: int | None = start
            while i is not None and i not in out:
                out.add(i)
                i = self.reactors[i].parent
        return out

    def to_json(self) -> dict[str, Any]:
        """The JSON form (a dict of JSON values) with ``"version"`` first."""
        return {"version": FORMAT_VERSION, **encode(self)}

    def dumps(self) -> str:
        """The JSON text of graph.json."""
        return json.dumps(self.to_json(), indent=1)

    @classmethod
    def from_json(cls, data: object, source: str = "<graph.json>") -> Program:
        """Decode the JSON form. ``source`` names it in errors.

        Raises:
            ProgramFormatError: another format version, or a field missing, unknown or of the
                wrong type (the message names ``source`` and the field).
        """
        if not isinstance(data, dict):
            raise ProgramFormatError(source, "expected a JSON object")
        version = data.get("version")
        if version != FORMAT_VERSION:
            raise ProgramFormatError(
                source,
                f"format version: expected {FORMAT_VERSION}, found {version!r} "
                "(rebuild the program with this lfc)",
            )
        try:
            program = decode(cls, {k: v for k, v in data.items() if k != "version"})
            _check_ids(program)
        except Mismatch as e:
            raise ProgramFormatError(source, str(e)) from None
        return program

    @classmethod
    def load(cls, path: str) -> Program:
        """Read a graph.json file. Relative paths in it (files and directories) are taken
        relative to the file's directory and made absolute.

        Raises:
            GraphError: the file cannot be read or is not JSON.
            ProgramFormatError: see :meth:`from_json`.
        """
        where = os.path.abspath(path)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise GraphError(f"cannot read {where}: {e}") from None
        return absolute_paths(cls.from_json(data, where), os.path.dirname(where))


def load(path: str) -> Program:
    """Same as :meth:`Program.load`."""
    return Program.load(path)


def absolute_paths(program: Program, base: str) -> Program:
    """``program`` with its relative file and directory paths made absolute against ``base``."""

    def fix(p: str) -> str:
        return p if not p or os.path.isabs(p) else os.path.normpath(os.path.join(base, p))

    files = [program.main_file, program.source_directory, program.package_directory]
    files += [r.file for r in program.reactors] + [r.file for r in program.reactions]
    if all(fix(f) == f for f in files + [r.file for r in program.line_map]):
        return program  # lfc writes absolute paths
    return dataclasses.replace(
        program,
        main_file=fix(program.main_file),
        source_directory=fix(program.source_directory),
        package_directory=fix(program.package_directory),
        reactors=tuple(dataclasses.replace(r, file=fix(r.file)) for r in program.reactors),
        reactions=tuple(dataclasses.replace(r, file=fix(r.file)) for r in program.reactions),
        line_map=tuple(r._replace(file=fix(r.file)) for r in program.line_map),
    )


def _check_ids(program: Program) -> None:
    for i, r in enumerate(program.reactors):
        if r.id != i:
            raise Mismatch(f"{i} (ids equal positions)", r.id).within(f"reactors[{i}].id")
