"""The program model step: the elaborated, analysed program as a
:class:`reactors.model.program.Program`.

This is the only place that turns the compiler's own structures (:mod:`codegen.instance`,
:mod:`codegen.target`) into the runtime's model. Placement and the line map are not known
here: placement is the next pipeline step (:func:`reactors.parallel.placement.placed`) and the line
map comes from emitting the module (:func:`codegen.emit.emit_program` fills it in).
"""

from __future__ import annotations

import ipaddress
import os
from collections import Counter

from reactors.model import program as pm
from reactors.model import references
from reactors.model.forwarding import instance_path

from . import tree
from .analyse import Analysis
from .classes import ReactorClass
from .instance import ConnectionView, Elaborated, Instance, ReactionInst
from .pyexpr import lf_text
from .structure import fixed_parameters
from .target import TargetConfig


def program_of(
    prog: Elaborated,
    analysis: Analysis,
    target: TargetConfig,
    name: str,
    main_file: str,
    package_dir: str,
) -> pm.Program:
    """The model of ``prog`` with its ``analysis`` (levels, inferred deadlines and ranks) for
    the program called ``name`` whose main reactor is in ``main_file``; every reactor on
    worker 0 and no line map yet."""
    return pm.Program(
        name=name,
        main_file=main_file,
        source_directory=os.path.dirname(main_file),
        package_directory=package_dir,
        module=f"{name}.py",
        target=target_settings(target),
        reactors=tuple(_instance(i) for i in prog.instances),
        reactions=tuple(_reaction(r, analysis) for r in prog.reactions),
        channels=tuple(pm.Channel(*s, *d) for s, d in prog.edges),
        connections=tuple(_connection(c) for c in prog.connections),
        main_parameters=main_parameters(prog),
        contained_parameters=contained_parameters(prog),
        federated=prog.sites["_lf_params_main"][1].decl.federated,
    )


def main_parameters(prog: Elaborated) -> tuple[pm.MainParameter, ...]:
    """The main reactor's parameters (``bank_index`` aside), with their ``.lf`` text after any
    ``lfc -D``, what fixes each at compile time and their descriptions, for the program's
    ``--help`` and its command line."""
    site, main, _ = prog.sites["_lf_params_main"]  # site: the -D values as assignments
    given = {a.name: a.value for a in site.node.assignments} if site else {}
    fixed = fixed_parameters(prog)
    return tuple(
        pm.MainParameter(
            name=p.name,
            type=p.type,
            default=lf_text(given.get(p.name, p.default)),
            file=p.pos.file,
            line=p.pos.line,
            fixed=fixed.get(("", p.name), ""),
            doc=doc_of(main, p.name),
        )
        for p in main.parameters
        if p.name != "bank_index"
    )


def contained_parameters(prog: Elaborated) -> tuple[pm.ContainedParameter, ...]:
    """The parameters of the instances inside the main reactor, one entry per instance path
    (a bank's members share theirs), parents first, for ``--PATH.NAME VALUE``."""
    fixed = fixed_parameters(prog)
    members = Counter(instance_path(i.name) for i in prog.instances if i.site is not None)
    out: list[pm.ContainedParameter] = []
    seen: set[str] = set()
    for inst in prog.instances:
        path = instance_path(inst.name)
        if inst.site is None or path in seen:  # the main reactor, a delay, a bank's member
            continue
        seen.add(path)
        given = {a.name: a.value for a in inst.site.assignments}
        out.extend(
            pm.ContainedParameter(
                path=path,
                name=p.name,
                class_name=inst.cls.name,
                type=p.type,
                default=lf_text(given.get(p.name, p.default)),
                declared=lf_text(p.default),
                file=p.pos.file,
                line=p.pos.line,
                members=members[path],
                fixed=fixed.get((path, p.name), ""),
                doc=doc_of(inst.cls, p.name),
            )
            for p in inst.cls.parameters
            if p.name != "bank_index"
        )
    return tuple(out)


def doc_of(cls: ReactorClass, name: str) -> str:
    """The description of parameter ``name`` of ``cls``: its own, else that of the nearest
    superclass that declares the parameter with one ("" without)."""
    p = cls.param(name)
    if p is not None and p.doc:
        return p.doc
    return next((d for s in cls.supers if (d := doc_of(s, name))), "")


def target_settings(t: TargetConfig) -> pm.TargetSettings:
    """The target properties the runtime reads."""
    return pm.TargetSettings(
        timeout=t.timeout,
        fast=t.fast,
        keepalive=t.keepalive,
        logging=t.logging,
        workers=t.workers,
        single_threaded=t.single_threaded,
        tracing=t.tracing,
        files=tuple(t.files),
        seed=t.seed,
    )


def _analysis(r: ReactionInst, analysis: Analysis) -> tuple[int, int | None, int]:
    """``(level, inferred deadline, rank)`` of a reaction, as the analysis computed them."""
    return analysis.levels[r.id], analysis.inferred_deadlines[r.id], analysis.ranks[r.id]


def _instance(i: Instance) -> pm.ReactorInstance:
    return pm.ReactorInstance(
        id=i.id,
        name=i.name,
        short=i.short,
        class_name=i.cls.name,
        pyclass=i.cls.pyclass,
        parent=i.parent.id if i.parent else None,
        bank_index=i.bank_index,
        bank_width=i.bank_width,
        params=i.params_fn,
        mode=i.mode,
        synthetic=None if i.synthetic is None else pm.Synthetic(i.synthetic),
        file=i.cls.file,
        line=i.site.pos.line if i.site else i.cls.decl.pos.line,
        label=_text_attribute(i.site.attributes if i.site else (), "label"),
        pin=_pin(i),
        node=_node(i),
        ports=tuple(
            pm.PortSpec(name=p.name, kind=pm.PortKind(p.kind), width=p.width, mutable=p.mutable)
            for p in i.ports.values()
        ),
        timers=tuple(
            pm.TimerSpec(name=t.name, offset=t.offset, period=t.period, mode=t.mode)
            for t in i.timers
        ),
        actions=tuple(
            pm.ActionSpec(
                name=a.name,
                origin=pm.Origin(a.origin),
                min_delay=a.min_delay,
                min_spacing=a.min_spacing,
                policy=pm.Policy(a.policy),
                mode=a.mode,
            )
            for a in i.actions
        ),
        modes=tuple(pm.ModeSpec(name=m.name, initial=m.initial) for m in i.cls.modes),
        reactions=tuple(r.id for r in sorted(i.reactions, key=lambda r: r.index)),
    )


def _reaction(r: ReactionInst, analysis: Analysis) -> pm.ReactionSpec:
    level, inferred_deadline, rank = _analysis(r, analysis)
    return pm.ReactionSpec(
        id=r.id,
        reactor=r.owner.id,
        index=r.index,
        name=r.node.name if r.node else None,
        label=_text_attribute(r.node.attributes if r.node else (), "label"),
        function=r.function,
        deadline=r.deadline,
        deadline_function=r.deadline_function,
        mode=r.mode,
        triggers=references.decode_refs([t.to_json() for t in r.triggers]),
        sources=references.decode_refs([t.to_json() for t in r.sources]),
        effects=references.decode_refs([t.to_json() for t in r.effects]),
        args=references.decode_args(r.args),
        level=level,
        inferred_deadline=inferred_deadline,
        rank=rank,
        file=r.file,
        line=r.line,
    )


def _connection(c: ConnectionView) -> pm.Connection:
    return pm.Connection(
        sources=tuple(references.PortKey(*e) for e in c.lhs),
        destinations=tuple(references.PortKey(*e) for e in c.rhs),
        delay=c.delay,
        physical=c.physical,
        iterated=c.iterated,
        container=c.container,
        line=c.line,
        label=c.label,
    )


def _pin(i: Instance) -> int | None:
    """The worker ``n`` of a ``@worker(n)`` attribute on the instantiation, or None."""
    a = next((a for a in (i.site.attributes if i.site else ()) if a.name == "worker"), None)
    if a is None or not a.params or not isinstance(a.params[0].value, tree.Literal):
        return None
    try:
        return int(a.params[0].value.text)
    except ValueError:
        return None


def _node(i: Instance) -> str | None:
    """The Ray resource that the node of the instance's worker must have with ``--cluster``:
    the label of ``@node("label")``, else for LF's ``at [user@]host[:port]`` the resource
    ``node:HOST`` of an IP address (every Ray node has that of its own address) or the
    host name itself (a custom resource the node is started with); None without either."""
    label = _text_attribute(i.site.attributes if i.site else (), "node")
    if label is not None or i.site is None or not i.site.host:
        return label
    host = i.site.host.rpartition("@")[2]
    if host.count(":") == 1:  # host:port (an IPv6 address has more colons)
        host = host.partition(":")[0]
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host
    return f"node:{host}"


def _text_attribute(attributes: tuple[tree.Attribute, ...], name: str) -> str | None:
    """The first literal argument of attribute ``@name(...)``, quotes removed, or None."""
    a = next((a for a in attributes if a.name == name), None)
    if a is None or not a.params or not isinstance(a.params[0].value, tree.Literal):
        return None
    return a.params[0].value.text.strip('"')
