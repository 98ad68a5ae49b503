"""Elaboration: instantiate the main reactor into a tree of instances (spec §1.13-§1.15).

Banks are expanded, parameters resolved, multiport and bank connections flattened to
channel-level edges (spec §1.14), ``after`` and ``~>`` lowered to synthetic delay instances
with an action (spec §3.11), and connections inside modes lowered to forwarding reactions of
the containing instance in that mode (spec §1.14, §3.12).
"""

from __future__ import annotations

from dataclasses import replace

from reactors.model.forwarding import instance_path

from . import tree
from .classes import Child, ClassTable, ReactorClass
from .diagnostics import Reporter
from .instance import (
    ActionInst,
    Channel,
    ConnectionView,
    Elaborated,
    Instance,
    PortInst,
    ReactionInst,
    TimerInst,
)
from .limits import MAX_CHANNELS, MAX_DEPTH, MAX_INSTANCES, MAX_WIDTH
from .reactions import build_reaction, forward_reaction
from .values import evaluate, time_of, width_of


class _Beyond(Exception):
    """A bound of :mod:`codegen.limits` was crossed and reported: elaboration stops at once,
    before anything of that size is built."""


class Elaborator:
    """Builds the instance tree; one object per compilation."""

    def __init__(
        self,
        rep: Reporter,
        delay_classes: dict[str, ReactorClass],
        defines: dict[str, tree.Expr],
    ):
        self.rep = rep
        self.delay_classes = delay_classes
        self.defines = {k: v for k, v in defines.items() if "." not in k}
        # -D PATH.NAME=VALUE: instance path -> its parameters' values
        self.contained: dict[str, dict[str, tree.Expr]] = {}
        for k, v in defines.items():
            if "." in k:
                path, _, name = k.rpartition(".")
                self.contained.setdefault(path, {})[name] = v
        self._given: dict[str, Child] = {}  # instance path -> its site with the -D values
        self.instances: list[Instance] = []
        self.reactions: list[ReactionInst] = []
        self.edges: list[tuple[Channel, Channel]] = []
        self.views: list[ConnectionView] = []
        self.sites: dict[str, tuple] = {}
        self._site_names: dict[tuple, str] = {}
        self._channels = 0  # port channels declared so far (bounded by MAX_CHANNELS)

    def run(self, main: ReactorClass) -> Elaborated:
        """The program below ``main``; a partial one when a size bound was crossed (an error
        is then reported)."""
        self.sites["_lf_params_main"] = (self._main_site(main), main, None)
        try:
            self._instantiate(main, None, None, 0, 1, None, "_lf_params_main", [])
        except _Beyond:
            pass
        return Elaborated(self.instances, self.reactions, self.edges, self.views, self.sites)

    def _main_site(self, main: ReactorClass) -> Child | None:
        """The main instance as if instantiated with the ``-D`` values as assignments (each
        placed at the parameter it sets); None without ``-D``."""
        if not self.defines:
            return None
        assignments = tuple(
            tree.Assignment(p.name, self.defines[p.name], p.pos)
            for p in main.parameters
            if p.name in self.defines
        )
        node = tree.Instantiation(
            name=main.name,
            class_name=main.name,
            width=None,
            assignments=assignments,
            type_args=(),
            host=None,
            attributes=(),
            pos=main.decl.pos,
        )
        return Child(node, None, main)

    # ------------------------------------------------------------------ instances

    def _instantiate(self, cls, parent, child: Child | None, index, width, mode, fn, stack):
        if cls in stack:
            loop = stack[stack.index(cls) :] + [cls]
            names = " -> ".join(c.name for c in loop)
            self.rep.error(
                f"cyclic instantiation: {names}", child.node.pos if child else cls.decl.pos
            )
            return None
        if not self._within_bounds(child, len(stack) + 1):
            return None
        short = child.node.name if child else cls.name
        name = short if parent is None else f"{parent.name}.{short}"
        if width > 1 or (child and child.node.width is not None):
            name += f"[{index}]"
        inst = Instance(
            id=len(self.instances),
            name=name,
            short=short,
            cls=cls,
            parent=parent,
            bank_index=index,
            bank_width=width,
            mode=mode,
            params={},
            params_fn=fn,
            site=child.node if child else None,
        )
        self.instances.append(inst)
        inst.params = self._params(inst, child)
        self._declare(inst)
        for ch in cls.children:
            self._children(inst, ch, stack + [cls])
        for conn in cls.connections:
            self._connection(inst, conn.node, conn.mode)
        for i, r in enumerate(cls.reactions):
            self._add_reaction(build_reaction(inst, i, r.node, r.mode, self.rep))
        return inst

    def _within_bounds(self, child: Child | None, depth: int) -> bool:
        """Whether one more instance at ``depth`` keeps the program within MAX_DEPTH (else
        reported at ``child``'s instantiation).

        Raises:
            _Beyond: one more instance would cross MAX_INSTANCES (reported there).
        """
        if child is None:
            return True
        if depth > MAX_DEPTH:
            self.rep.error(
                f"reactors are nested more than {MAX_DEPTH} levels deep here (the maximum)",
                child.node.pos,
            )
            return False
        self._count(1, 0, "this instantiation", child.node.pos)
        return True

    def _count(self, instances: int, channels: int, what: str, pos: tree.Pos) -> None:
        """Check that ``instances`` more reactor instances and ``channels`` more port channels
        keep the program within MAX_INSTANCES and MAX_CHANNELS; ``what`` at ``pos`` adds them.

        Raises:
            _Beyond: a bound would be crossed (reported at ``pos``).
        """
        if len(self.instances) + instances > MAX_INSTANCES:
            self.rep.error(
                f"the program has more than {MAX_INSTANCES:,} reactor instances (the maximum); "
                f"{what} crosses it",
                pos,
            )
            raise _Beyond
        self._channels += channels
        if self._channels > MAX_CHANNELS:
            self.rep.error(
                f"the program has more than {MAX_CHANNELS:,} port channels (the maximum); "
                f"{what} crosses it",
                pos,
            )
            raise _Beyond

    def _width(self, width: tree.Width | None, scope: dict) -> int:
        """:func:`width_of`, with widths above MAX_WIDTH reported and taken as 1."""
        value = width_of(width, scope, self.rep)
        if value > MAX_WIDTH and width is not None:
            self.rep.error(
                f"width {value} is larger than the maximum of {MAX_WIDTH:,} for a bank or "
                "multiport",
                width.pos,
            )
            return 1
        return value

    def _children(self, inst: Instance, ch: Child, stack) -> None:
        ch = self._with_defines(inst, ch)
        width = self._width(ch.node.width, inst.params) if ch.node.width else 1
        key = (id(ch.node), id(ch.cls))
        fn = self._site_names.setdefault(key, f"_lf_params_{len(self._site_names)}")
        self.sites[fn] = (ch, ch.cls, None)
        members = []
        for i in range(width):
            m = self._instantiate(ch.cls, inst, ch, i, width, ch.mode, fn, stack)
            if m is None:
                return
            members.append(m)
        inst.children[ch.node.name] = members

    def _with_defines(self, inst: Instance, ch: Child) -> Child:
        """``ch`` instantiated in ``inst``, its arguments replaced by the ``-D PATH.NAME``
        values for its path (one site, hence one parameter function, per such path)."""
        parent = instance_path(inst.name)
        path = f"{parent}.{ch.node.name}" if parent else ch.node.name
        given = self.contained.get(path)
        if not given:
            return ch
        if path not in self._given:
            node = ch.node
            kept = tuple(a for a in node.assignments if a.name not in given)
            added = tuple(tree.Assignment(n, v, node.pos) for n, v in given.items())
            self._given[path] = replace(ch, node=replace(node, assignments=kept + added))
        return self._given[path]

    def _params(self, inst: Instance, child: Child | None) -> dict:
        """Compile-time parameter values of ``inst`` (spec §1.13)."""
        values: dict = {}
        parent_scope = None
        if inst.parent is not None:
            parent_scope = dict(inst.parent.params)
            parent_scope.setdefault("bank_index", inst.parent.bank_index)
        if child is not None:
            assigned = {a.name: a.value for a in child.node.assignments}
        else:
            assigned = self.defines if inst.parent is None else {}
        for p in inst.cls.parameters:
            if p.name in assigned:
                values[p.name] = evaluate(assigned[p.name], parent_scope, self.rep)
            elif p.name == "bank_index":
                values[p.name] = inst.bank_index
            else:
                values[p.name] = evaluate(p.default, {}, self.rep)
        return values

    def _declare(self, inst: Instance) -> None:
        cls, scope, rep = inst.cls, inst.params, self.rep
        for p in cls.ports:
            port = PortInst(p.name, p.kind, self._width(p.width, scope), p.mutable)
            self._count(0, port.channels, "this port", p.pos)
            inst.ports[p.name] = port
        for t in cls.timers:
            n = t.node
            inst.timers.append(
                TimerInst(
                    n.name,
                    time_of(n.offset, scope, rep, "a timer offset") or 0,
                    time_of(n.period, scope, rep, "a timer period") or 0,
                    t.mode,
                )
            )
        for a in cls.actions:
            decl = a.node
            inst.actions.append(
                ActionInst(
                    decl.name,
                    decl.origin or "logical",
                    time_of(decl.min_delay, scope, rep, "an action's minimum delay") or 0,
                    time_of(decl.min_spacing, scope, rep, "an action's minimum spacing"),
                    decl.policy or "defer",
                    a.mode,
                )
            )

    def _add_reaction(self, r: ReactionInst) -> None:
        r.id = len(self.reactions)
        r.owner.reactions.append(r)
        self.reactions.append(r)

    # ------------------------------------------------------------------ connections

    def _connection(self, inst: Instance, conn: tree.Connection, mode: str | None) -> None:
        lhs = [c for ref in conn.lhs for c in self._ref_channels(inst, ref)]
        rhs = [c for ref in conn.rhs for c in self._ref_channels(inst, ref)]
        delay = time_of(conn.delay, inst.params, self.rep, "an 'after' delay")
        self._view(inst, conn, delay)
        if not lhs or not rhs:
            return
        if conn.iterated:
            if len(rhs) % len(lhs):
                self.rep.warning(
                    f"broadcast: {len(rhs)} destination channels are not a multiple "
                    f"of {len(lhs)} source channels",
                    conn.pos,
                )
            lhs = [lhs[i % len(lhs)] for i in range(len(rhs))]
        elif len(lhs) != len(rhs):
            self.rep.warning(
                f"connection widths differ: {len(lhs)} source channels, "
                f"{len(rhs)} destination channels",
                conn.pos,
            )
        pairs = list(zip(lhs, rhs))
        if conn.delay is not None or conn.physical:
            pairs = self._lower_delay(inst, conn, mode, delay or 0, pairs)
        if mode is None:
            self.edges.extend(pairs)
        elif pairs:
            self._add_reaction(forward_reaction(inst, mode, pairs, conn.pos))

    def _lower_delay(self, inst, conn, mode, delay, pairs):
        """One synthetic delay instance per distinct source channel (spec §3.11)."""
        kind = "physical_delay" if conn.physical else "delay"
        cls = self.delay_classes[kind]
        fn = f"_lf_params_{kind}_{delay}"
        self.sites[fn] = (None, cls, {"delay": delay})
        made: dict[Channel, Instance] = {}
        out = []
        for src, dst in pairs:
            d = made.get(src)
            if d is None:
                self._count(1, 2, "the delay of this connection", conn.pos)
                d = Instance(
                    id=len(self.instances),
                    name=f"{inst.name}._lf_delay_{len(self.instances)}",
                    short=f"_lf_delay_{len(self.instances)}",
                    cls=cls,
                    parent=inst,
                    bank_index=0,
                    bank_width=1,
                    mode=mode,
                    params={"delay": delay},
                    params_fn=fn,
                    site=None,
                    synthetic=kind,
                )
                self.instances.append(d)
                self._declare_delay(d, delay, conn.physical, mode)
                made[src] = d
                self.edges.append((src, (d.id, "inp", 0)))
            out.append(((d.id, "out", 0), dst))
        return out

    def _declare_delay(self, d: Instance, delay: int, physical: bool, mode) -> None:
        d.ports = {
            "inp": PortInst("inp", "input", -2, False),
            "out": PortInst("out", "output", -2, False),
        }
        d.actions = [
            ActionInst("act", "physical" if physical else "logical", delay, None, "defer", None)
        ]
        for i, r in enumerate(d.cls.reactions):
            self._add_reaction(build_reaction(d, i, r.node, r.mode, self.rep))

    def _ref_channels(self, inst: Instance, ref: tree.VarRef) -> list[Channel]:
        """Channels of a connection endpoint, bank-major or (interleaved) port-major (names
        were checked by :mod:`codegen.class_check`)."""
        if ref.container is None:
            return inst.channels(ref.name)
        members = inst.children.get(ref.container)
        if not members:
            return []  # the instance was not made: a cyclic instantiation, already reported
        if not ref.interleaved:
            return [c for m in members for c in m.channels(ref.name)]
        width = members[0].ports[ref.name].channels
        return [(m.id, ref.name, k) for k in range(width) for m in members]

    def _view(self, inst: Instance, conn: tree.Connection, delay: int | None) -> None:
        def ends(refs):
            out = []
            for r in refs:
                ms = [inst] if r.container is None else inst.children.get(r.container, [])
                out.extend((m.id, r.name) for m in ms if r.name in m.ports)
            return tuple(out)

        label = next((_attr_text(a) for a in conn.attributes if a.name == "label"), None)
        self.views.append(
            ConnectionView(
                inst.id,
                ends(conn.lhs),
                ends(conn.rhs),
                delay,
                conn.physical,
                conn.iterated,
                conn.pos.line,
                label,
            )
        )


def _attr_text(a: tree.Attribute) -> str | None:
    if a.params and isinstance(a.params[0].value, tree.Literal):
        return a.params[0].value.text.strip('"')
    return None


def elaborate(
    main: ReactorClass,
    table: ClassTable,
    delay_classes: dict[str, ReactorClass],
    rep: Reporter,
    defines: dict[str, tree.Expr] | None = None,
) -> Elaborated:
    """Instantiate ``main`` and everything below it.

    ``defines`` maps main-reactor parameters to the values given by ``lfc -D`` (checked
    by :func:`codegen.check.check_defines`); they replace the defaults of the main instance.
    A key ``PATH.NAME`` is a parameter of the instances at PATH inside main: its value
    replaces their instantiation's argument.
    Names were resolved by :mod:`codegen.class_check`. Errors in values (bad widths or times) and
    cyclic instantiation are reported through ``rep``; the caller calls ``rep.check()``.
    """
    return Elaborator(rep, delay_classes, defines or {}).run(main)
