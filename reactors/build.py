"""Build the runtime objects of a program from graph.json and its generated module.

Input: the generated module (classes, ``_lf_params_*`` functions) and the parsed graph.json
(docs/PROGRAM.md). Output: a :class:`Program` of plain objects (instances, channel ports,
actions, timers, reactions ordered by rank, modes) that a scheduler attaches to. Nothing here
runs per tag.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from .action import Action, PhysicalAction
from .errors import BuildFailure, GraphError, SourceMap
from .mode import ModalState, Mode, ModeCapsule, ModeSystem
from .port import Multiport, Port
from .reaction import Reaction, forward, reaction_number
from .reactor import Make
from .target import DEFAULTS
from .timer import Timer
from .topology import ancestors


@dataclass
class Instance:
    """One reactor instance: its graph entry, the Python object and its modal context."""

    id: int
    name: str
    obj: object
    parent: Instance | None
    info: dict
    enclosing: Mode | None = None
    modal: ModalState | None = None


@dataclass
class Program:
    """Everything a scheduler needs; ``reactions`` is indexed by (dense) rank."""

    name: str
    target: dict
    instances: list
    reactions: list
    ports: list
    actions: list
    timers: list
    startup: list  # ranks of startup reactions outside modes
    shutdown: list  # Reaction objects triggered by shutdown
    modes: ModeSystem
    mode_capsules: list
    source_map: SourceMap
    source_directory: str = ""
    package_directory: str = ""
    physical_actions: bool = False
    extra: dict = field(default_factory=dict)


def build(module, graph: dict, owned=None) -> Program:
    """Instantiate ``graph`` (a parsed graph.json) with the classes of ``module``.

    ``owned``: the set of reactor ids this worker runs (None: all). Only owned instances are
    fully constructed and only their reactions, actions and timers are built; their
    ancestors become *shells* (parameters only, no state initialisers) so that parameter
    functions can see their container; other instances are not constructed (``obj`` None).
    Ports of every instance exist (cheap). ``Program.reactions`` keeps global ranks: a
    reaction of another worker is None at its rank.

    Raises GraphError when the graph is malformed or names something the module lacks, and
    BuildFailure when user code (parameter functions, state initialisers) raises.
    """
    return _Builder(module, graph, owned).build()


class _Builder:
    def __init__(self, module, graph: dict, owned=None):
        if graph.get("version") != 1:
            raise GraphError(f"unsupported graph.json version {graph.get('version')!r}")
        self.module = module
        self.g = graph
        self.smap = SourceMap(getattr(module, "__file__", None), graph.get("line_map", []))
        self.instances: list[Instance] = []
        self.chan: dict = {}  # (rid, port, ch) -> Port (before root resolution)
        self.multi: dict = {}  # (rid, port) -> width (-2 for plain)
        self.root: dict = {}  # (rid, port, ch) -> root Port
        self.capsules: dict = {}
        self.actions: dict = {}  # (rid, name) -> Action
        self.timers: dict = {}  # (rid, name) -> Timer
        self.mode_capsules: list = []
        self.owned = owned
        self.needed = None if owned is None else ancestors(graph, owned)

    def _owns(self, rid: int) -> bool:
        return self.owned is None or rid in self.owned

    def build(self) -> Program:
        self._instantiate()
        self._modes()
        self._ports()
        self._actions_and_timers()
        reactions, startup, shutdown = self._reactions()
        target = dict(DEFAULTS.to_json(), **self.g.get("target", {}))
        roots = list({id(p): p for p in self.root.values()}.values())
        modes = [m for inst in self.instances if inst.modal for m in inst.modal.modes.values()]
        states = [inst.modal for inst in self.instances if inst.modal]
        return Program(
            name=self.g.get("name", "?"),
            target=target,
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
            source_directory=self.g.get("source_directory", ""),
            package_directory=self.g.get("package_directory", ""),
            physical_actions=any(isinstance(a, PhysicalAction) for a in self.actions.values()),
            extra={"roots": self.root},
        )

    # ------------------------------------------------------------------ instances

    def _lookup(self, name: str, what: str):
        try:
            return getattr(self.module, name)
        except AttributeError:
            raise GraphError(f"the module has no {what} '{name}'") from None

    def _instantiate(self) -> None:
        for i, info in enumerate(self.g["reactors"]):
            if info["id"] != i:
                raise GraphError(f"reactor ids must equal their index (got {info['id']} at {i})")
            parent = None if info.get("parent") is None else self.instances[info["parent"]]
            if self.needed is not None and i not in self.needed:
                self.instances.append(Instance(i, info["name"], None, parent, info))
                continue
            cls = self._lookup(info["pyclass"], "class")
            fn = info.get("params")
            bank_index = info.get("bank_index", 0)
            try:
                params = (
                    {}
                    if fn is None
                    else self._lookup(fn, "parameter function")(
                        None if parent is None else parent.obj, bank_index
                    )
                )
                obj = (
                    cls(info["name"], bank_index, params)
                    if self._owns(i)
                    else _shell(cls, info["name"], bank_index, params)
                )
            except (GraphError, KeyboardInterrupt):
                raise
            except BaseException as exc:
                raise BuildFailure(f"instantiating {info['name']}", exc) from exc
            self.instances.append(Instance(i, info["name"], obj, parent, info))

    def _modes(self) -> None:
        for inst in self.instances:
            if not self._owns(inst.id):
                continue  # placement keeps modal reactors with everything inside them
            info = inst.info
            if inst.parent is not None:
                inst.enclosing = (
                    inst.parent.modal.modes[info["mode"]]
                    if info.get("mode")
                    else inst.parent.enclosing
                )
            if info.get("modes"):
                st = ModalState(inst.name, inst.obj, inst.id)
                for m in info["modes"]:
                    mode = Mode(m["name"], st, inst.enclosing)
                    st.modes[m["name"]] = mode
                    if m.get("initial"):
                        st.initial = mode
                if st.initial is None:
                    raise GraphError(f"{inst.name}: a modal reactor needs an initial mode")
                inst.modal = st
                for mode in st.modes.values():
                    for outer in _chain(mode.enclosing):
                        outer.nested.append(mode)
            for outer in _chain(inst.enclosing):
                outer.state.nested_instances.setdefault(outer.name, []).append(inst.obj)

    def _mode_of(self, inst: Instance, name):
        """The nearest enclosing mode of an element declared in ``inst`` (own mode ``name``)."""
        if not name:
            return inst.enclosing
        if inst.modal is None or name not in inst.modal.modes:
            raise GraphError(f"{inst.name} has no mode '{name}'")
        return inst.modal.modes[name]

    # ------------------------------------------------------------------ ports

    def _ports(self) -> None:
        for inst in self.instances:
            for p in inst.info.get("ports", []):
                w = p.get("width", -2)
                self.multi[(inst.id, p["name"])] = w
                for ch in range(1 if w == -2 else w):
                    label = f"{inst.name}.{p['name']}" + ("" if w == -2 else f"[{ch}]")
                    self.chan[(inst.id, p["name"], ch)] = Port(label)
        up = {}
        for c in self.g.get("channels", []):
            src, dst = (c[0], c[1], c[2]), (c[3], c[4], c[5])
            for key in (src, dst):
                if key not in self.chan:
                    raise GraphError(f"channel {c} names an unknown port channel {key}")
            if dst in up:
                raise GraphError(f"port channel {dst} is written by two connections")
            up[dst] = src
        for key in self.chan:
            seen, k = set(), key
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

    def _capsule(self, rid: int, port: str):
        key = (rid, port)
        if key not in self.capsules:
            if key not in self.multi:
                raise GraphError(f"{self._iname(rid)} has no port '{port}'")
            w = self.multi[key]
            self.capsules[key] = (
                self._channel(rid, port, 0)
                if w == -2
                else Multiport(
                    [self._channel(rid, port, i) for i in range(w)], f"{self._iname(rid)}.{port}"
                )
            )
        return self.capsules[key]

    def _roots(self, rid: int, port: str) -> list:
        cap = self._capsule(rid, port)
        return list(cap) if isinstance(cap, Multiport) else [cap]

    # ------------------------------------------------------------------ actions and timers

    def _actions_and_timers(self) -> None:
        for inst in self.instances:
            if not self._owns(inst.id):
                continue
            for a in inst.info.get("actions", []):
                cls = PhysicalAction if a.get("origin") == "physical" else Action
                self.actions[(inst.id, a["name"])] = cls(
                    f"{inst.name}.{a['name']}",
                    a.get("min_delay") or 0,
                    a.get("min_spacing"),
                    a.get("policy") or "defer",
                    self._mode_of(inst, a.get("mode")),
                )
            for t in inst.info.get("timers", []):
                mode = self._mode_of(inst, t.get("mode"))
                timer = Timer(
                    f"{inst.name}.{t['name']}", t.get("offset") or 0, t.get("period") or 0, mode
                )
                self.timers[(inst.id, t["name"])] = timer
                if mode is not None:
                    mode.timers.append(timer)

    def _named(self, table: dict, rid: int, name: str, what: str):
        try:
            return table[(rid, name)]
        except KeyError:
            raise GraphError(f"{self._iname(rid)} has no {what} '{name}'") from None

    # ------------------------------------------------------------------ reactions

    def _reactions(self):
        by_id = {r["id"]: r for r in self.g.get("reactions", [])}
        order = sorted(by_id.values(), key=lambda r: (r["rank"], r["id"]))
        reactions, startup, shutdown = [], [], []
        triggers: dict = {}  # trigger object -> set of ranks
        for rank, rx in enumerate(order):
            if not self._owns(rx["reactor"]):
                reactions.append(None)
                continue
            r = self._reaction(rx)
            r.rank = rank
            reactions.append(r)
            for trig in rx.get("triggers", []):
                self._register(trig, r, rx, triggers, startup, shutdown)
        for obj, ranks in triggers.items():
            obj._triggers = tuple(sorted(ranks))
        return reactions, startup, shutdown

    def _reaction(self, rx: dict) -> Reaction:
        inst = self.instances[rx["reactor"]]
        args, mutable = [], []
        for i, a in enumerate(rx.get("args", [])):
            if a["kind"] == "mutable":
                mutable.append(i)
            args.append(self._arg(inst, a))
        fn = rx.get("function") or f"reaction_function_{rx['index']}"
        if fn == "_lf_forward":
            named = {a["name"]: v for a, v in zip(rx.get("args", []), args)}
            body = forward(named.get("src", []), named.get("dst", []))
        else:
            body = self._method(inst, fn)
        handler = (
            self._method(inst, rx["deadline_function"]) if rx.get("deadline_function") else None
        )
        deadline = rx.get("deadline")
        if deadline is not None and handler is None:
            n = reaction_number(rx["index"])
            raise GraphError(f"{inst.name} reaction {n}: deadline without a handler")
        return Reaction(
            index=rx["index"],
            name=rx.get("name"),
            owner=inst.name,
            body=body,
            args=args,
            handler=handler,
            deadline=deadline,
            mode=self._mode_of(inst, rx.get("mode")),
            mutable=mutable,
            is_shutdown=any(t["kind"] == "shutdown" for t in rx["triggers"]),
            file=rx.get("file", ""),
            line=rx.get("line", 0),
        )

    def _method(self, inst: Instance, name: str):
        fn = getattr(inst.obj, name, None)
        if fn is None:
            raise GraphError(f"class {inst.info['pyclass']} has no method '{name}'")
        return fn

    def _arg(self, inst: Instance, a: dict):
        kind = a["kind"]
        if kind in ("port", "mutable"):
            return self._capsule(a["reactor"], a["port"])
        if kind == "action":
            return self._named(self.actions, inst.id, a["action"], "action")
        if kind == "contained":
            return self._make(a["reactor"], a["ports"])
        if kind == "bank":
            return [self._make(rid, a["ports"]) for rid in a["reactors"]]
        if kind == "bank_ports":
            return [self._capsule(rid, a["port"]) for rid in a["reactors"]]
        if kind == "mode":
            if inst.modal is None or a["mode"] not in inst.modal.modes:
                raise GraphError(f"{inst.name} has no mode '{a['mode']}'")
            cap = ModeCapsule(
                inst.modal, inst.modal.modes[a["mode"]], a.get("transition") or "reset"
            )
            self.mode_capsules.append(cap)
            return cap
        if kind == "channels":
            return [self._channel(rid, port, ch) for rid, port, ch in a["channels"]]
        raise GraphError(f"unknown argument kind '{kind}'")

    def _make(self, rid: int, ports) -> Make:
        return Make(**{p: self._capsule(rid, p) for p in ports})

    def _register(self, trig, r, rx, triggers, startup, shutdown) -> None:
        kind = trig["kind"]
        inst = self.instances[rx["reactor"]]
        if kind == "startup":
            (startup if r.mode is None else r.mode.startup).append(r.rank)
        elif kind == "shutdown":
            shutdown.append(r)
        elif kind == "reset":
            if r.mode is not None:
                r.mode.reset.append(r.rank)
        elif kind == "timer":
            triggers.setdefault(
                self._named(self.timers, inst.id, trig["name"], "timer"), set()
            ).add(r.rank)
        elif kind == "action":
            triggers.setdefault(
                self._named(self.actions, inst.id, trig["name"], "action"), set()
            ).add(r.rank)
        elif kind == "port":
            for port in self._roots(trig["reactor"], trig["name"]):
                triggers.setdefault(port, set()).add(r.rank)
        else:
            raise GraphError(f"unknown trigger kind '{kind}'")


def _shell(cls, name: str, bank_index: int, params: dict):
    """An instance of ``cls`` with its parameters but no state (a container of this worker's
    reactors that runs elsewhere): ``ReactorBase.__init__`` without ``_lf_init_state``."""
    obj = cls.__new__(cls)
    obj._lf_name = name
    obj._bank_index = bank_index
    for key, value in params.items():
        setattr(obj, "_" + key, value)
    return obj


def _chain(mode):
    """``mode`` and its enclosing modes, innermost first."""
    while mode is not None:
        yield mode
        mode = mode.enclosing


def load_graph(path: str) -> dict:
    """Parse a graph.json file. Raises GraphError if it cannot be read or parsed.

    Extension of PROGRAM.md: file and directory paths in the graph may be relative; they
    are taken relative to the directory of graph.json and made absolute here.
    """
    try:
        with open(path, encoding="utf-8") as f:
            graph = json.load(f)
    except (OSError, ValueError) as e:
        raise GraphError(f"cannot read {os.path.abspath(path)}: {e}") from None
    absolutize(graph, os.path.dirname(os.path.abspath(path)))
    return graph


def absolutize(graph: dict, base: str) -> dict:
    """Make the graph's relative paths absolute against directory ``base`` (in place)."""

    def fix(p):
        return (
            p
            if not isinstance(p, str) or os.path.isabs(p)
            else os.path.normpath(os.path.join(base, p))
        )

    for key in ("main_file", "source_directory", "package_directory"):
        if key in graph:
            graph[key] = fix(graph[key])
    for item in graph.get("reactors", []) + graph.get("reactions", []):
        if "file" in item:
            item["file"] = fix(item["file"])
    graph["line_map"] = [[a, b, fix(f), c] for a, b, f, c in graph.get("line_map", [])]
    return graph
