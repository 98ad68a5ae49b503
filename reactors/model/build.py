"""Build the runtime objects of a program from its model and its generated module.

Input: the generated module (classes, ``_lf_params_*`` functions) and the program model
(:class:`reactors.model.program.Program`, read from graph.json). Output: a
:class:`reactors.core.assembly.Assembly` of plain objects (instances, channel ports, actions,
timers, reactions ordered by rank, modes) that a scheduler attaches to. Nothing here runs per
tag.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from types import ModuleType
from typing import Any, TypeVar

from ..core.action import Action, PhysicalAction
from ..core.assembly import Assembly, Instance
from ..core.batched import BankPorts
from ..core.context import CTX
from ..core.errors import BuildFailure, GraphError, SourceMap
from ..core.mode import ModalState, Mode, ModeCapsule, ModeSystem
from ..core.port import Multiport, Port, group_fan_ins
from ..core.reaction import Reaction, forward, reaction_number
from ..core.reactor import Make, ReactorBase
from ..core.timer import Timer
from . import program as spec
from . import references
from .arguments import values as argument_values
from .forwarding import Forwarded, is_contained

_Chan = tuple[int, str, int]  # (reactor id, port name, channel index)
_PortAt = tuple[int, str]  # (reactor id, port name)
_T = TypeVar("_T")


def build(
    module: ModuleType, model: spec.Program, owned: Collection[int] | None = None
) -> Assembly:
    """Instantiate ``model`` (the program read from graph.json) with the classes of ``module``.

    ``owned``: the set of reactor ids this worker runs (None: all). Only owned instances are
    fully constructed and only their reactions, actions and timers are built; their
    ancestors become *shells* (parameters only, no state initialisers) so that parameter
    functions can see their container; other instances are not constructed (``obj`` None).
    Ports of every instance exist (cheap). ``Assembly.reactions`` keeps global ranks: a
    reaction of another worker is None at its rank.

    Raises GraphError when the model is inconsistent or names something the module lacks, and
    BuildFailure when user code (parameter functions, state initialisers) raises.
    """
    return _Builder(module, model, owned).build()


class _Builder:
    def __init__(
        self, module: ModuleType, model: spec.Program, owned: Collection[int] | None = None
    ):
        self.module = module
        self.g = model
        self.smap = SourceMap(getattr(module, "__file__", None), model.line_map)
        self.instances: list[Instance] = []
        self.chan: dict[_Chan, Port] = {}  # (rid, port, ch) -> Port (before root resolution)
        self.multi: dict[_PortAt, int] = {}  # (rid, port) -> width (PLAIN_WIDTH for plain)
        self.root: dict[_Chan, Port] = {}  # (rid, port, ch) -> root Port
        self.capsules: dict[_PortAt, Port | Multiport] = {}
        self.actions: dict[tuple[int, str], Action] = {}  # (rid, name) -> Action
        self.timers: dict[tuple[int, str], Timer] = {}  # (rid, name) -> Timer
        self.mode_capsules: list[ModeCapsule] = []
        self.owned = owned
        # the main reactor too, on a worker that owns no reactor: its checkpoint policy asks
        # every worker for a snapshot part, and lf.main_parameters() come from it
        mains = (r.id for r in model.reactors if r.parent is None)
        self.needed = None if owned is None else model.ancestors([*owned, *mains])
        self.main_arguments = tuple(a for a in model.arguments if not is_contained(a))
        self.forwarded = Forwarded(model.arguments)  # --PATH.NAME VALUE of contained instances
        # lf.forwarded_parameters(), alike in every worker
        CTX.forwarded = {a.name: a.text for a in model.arguments if is_contained(a)}

    def _owns(self, rid: int) -> bool:
        return self.owned is None or rid in self.owned

    def build(self) -> Assembly:
        self._instantiate()
        self._modes()
        self._ports()
        self._actions_and_timers()
        reactions, startup, shutdown = self._reactions()
        roots = list({id(p): p for p in self.root.values()}.values())
        modes = [m for inst in self.instances if inst.modal for m in inst.modal.modes.values()]
        states = [inst.modal for inst in self.instances if inst.modal]
        return Assembly(
            name=self.g.name,
            instances=self.instances,
            reactions=reactions,
            ports=roots,
            actions=list(self.actions.values()),
            timers=list(self.timers.values()),
            startup=startup,
            shutdown=shutdown,
            modes=ModeSystem(states, modes),
            mode_capsules=self.mode_capsules,
            source_map=self.smap,
            source_directory=self.g.source_directory,
            package_directory=self.g.package_directory,
            physical_actions=any(isinstance(a, PhysicalAction) for a in self.actions.values()),
            extra={"roots": self.root},
        )

    # ------------------------------------------------------------------ instances

    def _lookup(self, name: str, what: str) -> Any:
        try:
            return getattr(self.module, name)
        except AttributeError:
            raise GraphError(f"the module has no {what} '{name}'") from None

    def _instantiate(self) -> None:
        for i, info in enumerate(self.g.reactors):
            if info.id != i:
                raise GraphError(f"reactor ids must equal their index (got {info.id} at {i})")
            parent = None if info.parent is None else self.instances[info.parent]
            if self.needed is not None and i not in self.needed:
                self.instances.append(Instance(i, info.name, None, parent))
                continue
            cls = self._lookup(info.pyclass, "class")
            fn = info.params
            bank_index = info.bank_index
            try:
                params = (
                    {}
                    if fn is None
                    else self._lookup(fn, "parameter function")(
                        None if parent is None else parent.obj, bank_index
                    )
                )
                params.update(self._given(info))
                if parent is None:  # lf.main_parameters(), alike in every worker
                    CTX.main_parameters = dict(params)
                obj = (
                    cls(info.name, bank_index, params)
                    if self._owns(i)
                    else _shell(cls, info.name, bank_index, params)
                )
            except (GraphError, KeyboardInterrupt):
                raise
            except BaseException as exc:
                raise BuildFailure(f"instantiating {info.name}", exc) from exc
            self.instances.append(Instance(i, info.name, obj, parent))

    def _given(self, info: spec.ReactorInstance) -> dict[str, Any]:
        """The parameters of instance ``info`` given on the command line: the main
        reactor's (``--seed 3``), a contained instance's (``--learner.device cpu``)."""
        namespace = vars(self.module)
        if info.parent is None:
            return argument_values(self.main_arguments, namespace) if self.main_arguments else {}
        return self.forwarded.values(info.name, namespace) if self.forwarded.by_path else {}

    def _modes(self) -> None:
        for inst in self.instances:
            if not self._owns(inst.id):
                continue  # placement keeps modal reactors with everything inside them
            info = self.g.reactors[inst.id]
            parent = inst.parent
            if parent is not None:
                if info.mode:
                    assert parent.modal is not None  # a mode names one of its parent's modes
                    inst.enclosing = parent.modal.modes[info.mode]
                else:
                    inst.enclosing = parent.enclosing
            if info.modes:
                st = ModalState(inst.name, inst.obj, inst.id)
                for m in info.modes:
                    mode = Mode(m.name, st, inst.enclosing)
                    st.modes[m.name] = mode
                    if m.initial:
                        st.initial = mode
                if st.initial is None:
                    raise GraphError(f"{inst.name}: a modal reactor needs an initial mode")
                inst.modal = st
                for mode in st.modes.values():
                    for outer in _chain(mode.enclosing):
                        outer.nested.append(mode)
            for outer in _chain(inst.enclosing):
                outer.state.nested_instances.setdefault(outer.name, []).append(inst.obj)

    def _mode_of(self, inst: Instance, name: str | None) -> Mode | None:
        """The nearest enclosing mode of an element declared in ``inst`` (own mode ``name``)."""
        if not name:
            return inst.enclosing
        if inst.modal is None or name not in inst.modal.modes:
            raise GraphError(f"{inst.name} has no mode '{name}'")
        return inst.modal.modes[name]

    # ------------------------------------------------------------------ ports

    def _ports(self) -> None:
        for inst in self.instances:
            for p in self.g.reactors[inst.id].ports:
                self.multi[(inst.id, p.name)] = p.width
                for ch in range(p.channels):
                    plain = p.width == spec.PLAIN_WIDTH
                    label = f"{inst.name}.{p.name}" + ("" if plain else f"[{ch}]")
                    self.chan[(inst.id, p.name, ch)] = Port(label)
        up: dict[_Chan, _Chan] = {}  # a channel -> the channel that writes it
        for c in self.g.channels:
            src, dst = c.src, c.dst
            for end in (src, dst):
                if end not in self.chan:
                    raise GraphError(f"channel {[*src, *dst]} names an unknown port channel {end}")
            if dst in up:
                raise GraphError(f"port channel {dst} is written by two connections")
            up[dst] = src
        for key in self.chan:
            seen: set[_Chan] = set()
            k = key
            while k in up:
                if k in seen:
                    raise GraphError(f"connection cycle through port channel {k}")
                seen.add(k)
                k = up[k]
            self.root[key] = self.chan[k]

    def _channel(self, rid: int, port: str, ch: int) -> Port:
        try:
            return self.root[(rid, port, ch)]
        except KeyError:
            raise GraphError(f"unknown port channel {self._iname(rid)}.{port}[{ch}]") from None

    def _iname(self, rid: int) -> str:
        return self.instances[rid].name if 0 <= rid < len(self.instances) else f"#{rid}"

    def _capsule(self, rid: int, port: str) -> Port | Multiport:
        key = (rid, port)
        if key not in self.capsules:
            if key not in self.multi:
                raise GraphError(f"{self._iname(rid)} has no port '{port}'")
            w = self.multi[key]
            self.capsules[key] = (
                self._channel(rid, port, 0)
                if w == spec.PLAIN_WIDTH
                else Multiport(
                    [self._channel(rid, port, i) for i in range(w)], f"{self._iname(rid)}.{port}"
                )
            )
        return self.capsules[key]

    def _roots(self, rid: int, port: str) -> list[Port]:
        cap = self._capsule(rid, port)
        return list(cap) if isinstance(cap, Multiport) else [cap]

    # ------------------------------------------------------------------ actions and timers

    def _actions_and_timers(self) -> None:
        for inst in self.instances:
            if not self._owns(inst.id):
                continue
            for a in self.g.reactors[inst.id].actions:
                cls = PhysicalAction if a.origin == spec.Origin.PHYSICAL else Action
                self.actions[(inst.id, a.name)] = cls(
                    f"{inst.name}.{a.name}",
                    a.min_delay,
                    a.min_spacing,
                    a.policy.value,
                    self._mode_of(inst, a.mode),
                )
            for t in self.g.reactors[inst.id].timers:
                mode = self._mode_of(inst, t.mode)
                timer = Timer(f"{inst.name}.{t.name}", t.offset, t.period, mode)
                self.timers[(inst.id, t.name)] = timer
                if mode is not None:
                    mode.timers.append(timer)

    def _named(self, table: dict[tuple[int, str], _T], rid: int, name: str, what: str) -> _T:
        try:
            return table[(rid, name)]
        except KeyError:
            raise GraphError(f"{self._iname(rid)} has no {what} '{name}'") from None

    # ------------------------------------------------------------------ reactions

    def _reactions(self) -> tuple[list[Reaction | None], list[int], list[Reaction]]:
        by_id = {r.id: r for r in self.g.reactions}
        order = sorted(by_id.values(), key=lambda r: (r.rank, r.id))
        reactions: list[Reaction | None] = []
        startup: list[int] = []
        shutdown: list[Reaction] = []
        triggers: dict[Port | Action | Timer, set[int]] = {}  # trigger -> ranks
        for rank, rx in enumerate(order):
            if not self._owns(rx.reactor):
                reactions.append(None)
                continue
            r = self._reaction(rx)
            r.rank = rank
            reactions.append(r)
            for trig in rx.triggers:
                self._register(trig, r, rx, triggers, startup, shutdown)
        for obj, ranks in triggers.items():
            obj._triggers = tuple(sorted(ranks))
        group_fan_ins(obj for obj in triggers if isinstance(obj, Port))
        return reactions, startup, shutdown

    def _reaction(self, rx: spec.ReactionSpec) -> Reaction:
        inst = self.instances[rx.reactor]
        args = [self._arg(inst, a) for a in rx.args]
        mutable = [i for i, a in enumerate(rx.args) if isinstance(a, references.MutableArg)]
        if rx.function == references.FORWARD:
            named = {a.name: v for a, v in zip(rx.args, args)}
            body = forward(named.get("src", []), named.get("dst", []))
        else:
            body = self._method(inst, rx.function)
        handler = self._method(inst, rx.deadline_function) if rx.deadline_function else None
        if rx.deadline is not None and handler is None:
            n = reaction_number(rx.index)
            raise GraphError(f"{inst.name} reaction {n}: deadline without a handler")
        return Reaction(
            index=rx.index,
            name=rx.name,
            owner=inst.name,
            body=body,
            args=args,
            handler=handler,
            deadline=rx.deadline,
            mode=self._mode_of(inst, rx.mode),
            mutable=mutable,
            is_shutdown=references.BuiltinTrigger(references.Builtin.SHUTDOWN) in rx.triggers,
            file=rx.file,
            line=rx.line,
        )

    def _method(self, inst: Instance, name: str) -> Any:
        fn = getattr(inst.obj, name, None)
        if fn is None:
            raise GraphError(f"class {self.g.reactors[inst.id].pyclass} has no method '{name}'")
        return fn

    def _arg(self, inst: Instance, a: references.Arg) -> Any:
        if isinstance(a, (references.PortArg, references.MutableArg)):
            return self._capsule(a.reactor, a.port)
        if isinstance(a, references.ActionArg):
            return self._named(self.actions, inst.id, a.action, "action")
        if isinstance(a, references.ContainedArg):
            return self._make(a.reactor, a.ports)
        if isinstance(a, references.BankArg):
            return [self._make(rid, a.ports) for rid in a.reactors]
        if isinstance(a, references.BankPortsArg):
            return BankPorts(self._capsule(rid, a.port) for rid in a.reactors)
        if isinstance(a, references.ModeArg):
            if inst.modal is None or a.mode not in inst.modal.modes:
                raise GraphError(f"{inst.name} has no mode '{a.mode}'")
            cap = ModeCapsule(inst.modal, inst.modal.modes[a.mode], a.transition.value)
            self.mode_capsules.append(cap)
            return cap
        return [self._channel(rid, port, ch) for rid, port, ch in a.channels]

    def _make(self, rid: int, ports: tuple[str, ...]) -> Make:
        return Make(**{p: self._capsule(rid, p) for p in ports})

    def _register(
        self,
        trig: references.Ref,
        r: Reaction,
        rx: spec.ReactionSpec,
        triggers: dict[Port | Action | Timer, set[int]],
        startup: list[int],
        shutdown: list[Reaction],
    ) -> None:
        inst = self.instances[rx.reactor]
        if isinstance(trig, references.BuiltinTrigger):
            if trig.kind == references.Builtin.STARTUP:
                (startup if r.mode is None else r.mode.startup).append(r.rank)
            elif trig.kind == references.Builtin.SHUTDOWN:
                shutdown.append(r)
            elif r.mode is not None:  # reset
                r.mode.reset.append(r.rank)
        elif isinstance(trig, references.TimerRef):
            timer = self._named(self.timers, inst.id, trig.name, "timer")
            triggers.setdefault(timer, set()).add(r.rank)
        elif isinstance(trig, references.ActionRef):
            action = self._named(self.actions, inst.id, trig.name, "action")
            triggers.setdefault(action, set()).add(r.rank)
        elif isinstance(trig, references.PortRef):
            for port in self._roots(trig.reactor, trig.name):
                triggers.setdefault(port, set()).add(r.rank)
        else:
            raise GraphError(f"a mode cannot trigger a reaction ({inst.name}: {trig})")


def _shell(
    cls: type[ReactorBase], name: str, bank_index: int, params: dict[str, Any]
) -> ReactorBase:
    """An instance of ``cls`` with its parameters but no state (a container of this worker's
    reactors that runs elsewhere): ``ReactorBase.__init__`` without ``_lf_init_state``."""
    obj = cls.__new__(cls)
    obj._lf_name = name
    obj._bank_index = bank_index
    obj._lf_param_names = tuple(params)
    for key, value in params.items():
        setattr(obj, "_" + key, value)
    return obj


def _chain(mode: Mode | None) -> Iterator[Mode]:
    """``mode`` and its enclosing modes, innermost first."""
    while mode is not None:
        yield mode
        mode = mode.enclosing
