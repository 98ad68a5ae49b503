"""The dataflow graph viewer: ``graph.json`` (and optionally a timing trace) to one HTML file.

``lfc-graph OUT/src-gen/Foo/graph.json [--trace TRACE.json] [-o graph.html]`` writes a single
self-contained page that opens offline: the program drawn the way LF draws it (spec §6), laid out
in the browser by ELK (elkjs, vendored in ``codegen/vendor/``) and drawn as SVG by the script in
``templates/viewer.html.j2``. Nothing is fetched from the network.

``graph.json`` is the elaborated program (:class:`reactors.model.program.Program`; banks expanded, ``after``/``~>`` lowered to synthetic
delay instances, connections inside modes lowered to ``_lf_forward`` reactions). This module turns
it back into what the user wrote: one box per bank (its members' levels, workers and timings
merged), the ``connections`` list as written with its delays, and no synthetic instances or
reactions.

Timing trace (optional): a Chrome/Perfetto trace-event JSON file, either a list of events or an
object with a ``traceEvents`` list, such as the ``<Name>.trace.json`` a run with the target
property ``tracing: true`` writes. An event counts when it has

- ``name``: the reaction, either as the runtime names it, ``reaction <n> of <instance>`` or
  ``reaction <n> (<name>) of <instance>``, or as ``<instance>.reaction_<n>``; ``n`` is the
  reaction's number as in the diagram (from 1, :func:`reactors.core.reaction.reaction_number`) and
  ``<instance>`` the full name (``PingPong.pong``, ``Foo.b[2]``);
- ``dur``: the time spent in one invocation, in microseconds (a ``"ph": "X"`` complete event).

Other events and fields (``ts``, ``pid``, ``tid``, ``args``) are ignored. Each reaction is
coloured by its total time (summed over bank members) relative to the busiest reaction.
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import jinja2

from reactors.core.errors import GraphError
from reactors.core.reaction import reaction_index, reaction_number
from reactors.core.units import format_duration as format_time
from reactors.model.program import (
    PLAIN_WIDTH,
    ActionSpec,
    ClusterRun,
    Connection,
    Policy,
    PortKind,
    PortSpec,
    Program,
    ReactionSpec,
    TimerSpec,
    WorkerChoice,
)
from reactors.model.references import (
    FORWARD,
    ActionRef,
    BuiltinTrigger,
    ModeRef,
    PortKey,
    PortRef,
    Ref,
    TimerRef,
    Transition,
)

HERE = Path(__file__).resolve().parent
ELK_JS = HERE / "vendor" / "elk.bundled.js"
ELK_VERSION = "0.12.1"
_PREFIX = {"startup": "s", "shutdown": "d", "reset": "z", "timer": "t", "action": "a"}


def choice_text(choice: WorkerChoice | None) -> str:
    """What the latest ``-w 0`` run chose and why, for the header (empty: no such run)."""
    if choice is None:
        return ""
    return f"; the latest -w 0 run chose {choice.workers}: {choice.reason}"


def cluster_text(run: ClusterRun | None) -> str:
    """Where the latest ``--cluster`` run's workers ran, for the header (empty: no such run)."""
    if run is None:
        return ""
    where = ", ".join(
        f"worker {w} on node {n.node_id[:12]} ({n.address})" for w, n in enumerate(run.nodes)
    )
    return f"; the latest --cluster run: {where}"


def workers_text(workers: int, single_threaded: bool = False) -> str:
    """The header's words for the target's ``workers``: ``'1 worker'``, ``'3 workers'``, and
    for 0 ``'one worker per core (chosen at run time)'``."""
    if single_threaded:
        return "1 worker (single-threaded)"
    if workers == 0:
        return "one worker per core (chosen at run time)"
    return f"{workers} worker{'' if workers == 1 else 's'}"


def bank_free(name: str) -> str:
    """``'Foo.o[1].inner[0]'`` -> ``'Foo.o.inner'``: the name every member of a bank shares."""
    return re.sub(r"\[\d+\]", "", name)


_RUNTIME_NAME = re.compile(r"reaction (\d+)(?: \(.*\))? of (.+)")
_DIAGRAM_NAME = re.compile(r"(.+)\.reaction_(\d+)")
Times = dict[tuple[str, int], tuple[float, int]]


def reaction_key(name: str) -> tuple[str, int] | None:
    """A trace event's name -> (instance full name, 0-based reaction index), or None."""
    if m := _RUNTIME_NAME.fullmatch(name):
        return m.group(2), reaction_index(int(m.group(1)))
    if m := _DIAGRAM_NAME.fullmatch(name):
        return m.group(1), reaction_index(int(m.group(2)))
    return None


def load_trace(path: str | Path) -> Times:
    """(instance, reaction index) -> (total microseconds, invocations), from a trace-event file."""
    data = json.loads(Path(path).read_text())
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    totals: Times = {}
    for e in events:
        if isinstance(e, dict) and isinstance(e.get("dur"), (int, float)):
            key = reaction_key(str(e.get("name", "")))
            if key is not None:
                us, n = totals.get(key, (0.0, 0))
                totals[key] = (us + e["dur"], n + 1)
    return totals


class Diagram:
    """The drawable program: nested boxes of plain dicts, ready for ``json.dumps``.

    Ids the renderer relies on: a box ``r<id>``, its ports ``r<id>:<port>``, a reaction ``x<id>``,
    a timer ``t<id>:<name>``, an action ``a<id>:<name>``, startup/shutdown/reset ``s<id>``,
    ``d<id>``, ``z<id>``, a mode ``m<id>:<name>``; a leaf's dependency ports add ``:i``/``:o``.
    """

    def __init__(self, program: Program, times: Times | None = None):
        self.program = program
        self.times = times or {}
        self.reactors = {r.id: r for r in program.reactors}
        self.reactions = {x.id: x for x in program.reactions}
        self.rep: dict[int, int] = {}
        self.members: dict[int, list[int]] = defaultdict(list)
        first: dict[str, int] = {}
        for r in program.reactors:
            self.rep[r.id] = first.setdefault(bank_free(r.name), r.id)
            self.members[self.rep[r.id]].append(r.id)
        self.hidden: set[int] = set()
        for r in program.reactors:  # parents come before children
            if r.synthetic or r.parent in self.hidden:
                self.hidden.add(r.id)
        self.by_index = {(x.reactor, x.index): x for x in program.reactions}
        self.children: dict[int, list[int]] = defaultdict(list)  # drawn boxes only
        for r in program.reactors:
            if r.parent is not None and self.rep[r.id] == r.id and r.id not in self.hidden:
                self.children[r.parent].append(r.id)
        self.edges: dict[int, dict[tuple, dict]] = defaultdict(dict)
        run = program.cluster_run  # the latest --cluster run's placement, if it matches
        if run is not None and len(run.placement) != len(program.reactors):
            run = None
        self.cluster_run = run
        self.worker_of = run.placement if run else tuple(r.worker for r in program.reactors)

    def nodes_of(self, workers: set[int]) -> list[str]:
        """The Ray nodes (short ids) where ``workers`` ran in the latest --cluster run."""
        run = self.cluster_run
        return sorted({run.nodes[w].node_id[:12] for w in workers}) if run else []

    def to_dict(self) -> dict:
        """The whole diagram: program facts and the main reactor's box."""
        main = next(r for r in self.program.reactors if r.parent is None)
        t = self.program.target
        return {
            "name": self.program.name,
            "file": self.program.main_file,
            "timeout": format_time(t.timeout),
            "workers": t.workers,
            "workers_text": workers_text(t.workers, t.single_threaded)
            + choice_text(self.program.worker_choice)
            + cluster_text(self.program.cluster_run),
            "fast": t.fast,
            "traced": bool(self.times),
            "root": self.box(main.id),
        }

    def box(self, rid: int) -> dict:
        """The box of reactor ``rid`` (a bank's first member stands for the bank)."""
        r = self.reactors[rid]
        for x in self.visible_reactions(rid):
            self.add_reaction_edges(rid, x)
        for c in self.program.connections:
            if c.container == rid:
                self.add_connection(rid, c)
        children = [self.box(c) for c in self.children[rid]] + self.leaves(rid)
        return {
            "id": f"r{rid}",
            "kind": "reactor",
            "inst": r.short,
            "class": r.class_name,
            "full": bank_free(r.name),
            "main": r.parent is None,
            "bank": r.bank_width if r.parent is not None else 1,
            "mode": r.mode,
            "file": r.file,
            "line": r.line,
            "label": r.label,
            "workers": sorted({self.worker_of[m] for m in self.members[rid]}),
            "nodes": self.nodes_of({self.worker_of[m] for m in self.members[rid]}),
            "ports": [self.port(rid, p) for p in r.ports],
            "modes": [
                {"id": f"m{rid}:{m.name}", "name": m.name, "initial": m.initial} for m in r.modes
            ],
            "children": children,
            "edges": list(self.edges[rid].values()),
        }

    @staticmethod
    def port(rid: int, p: PortSpec) -> dict:
        return {
            "id": f"r{rid}:{p.name}",
            "name": p.name,
            "dir": "in" if p.kind == PortKind.INPUT else "out",
            "width": p.width if p.width != PLAIN_WIDTH else None,
        }

    def visible_reactions(self, rid: int) -> list[ReactionSpec]:
        return [
            self.reactions[i]
            for i in self.reactors[rid].reactions
            if self.reactions[i].function != FORWARD
        ]

    def leaves(self, rid: int) -> list[dict]:
        """Reactions, timers, actions and startup/shutdown/reset triggers of one reactor."""
        r, xs = self.reactors[rid], self.visible_reactions(rid)
        kinds = {t.kind for x in xs for t in x.triggers if isinstance(t, BuiltinTrigger)}
        out: list[dict] = [
            {"id": f"{_PREFIX[k]}{rid}", "kind": k, "mode": None}
            for k in ("startup", "shutdown", "reset")
            if k in kinds
        ]
        out += [
            {
                "id": f"t{rid}:{t.name}",
                "kind": "timer",
                "name": t.name,
                "mode": t.mode,
                "text": self.timer_text(t),
            }
            for t in r.timers
        ]
        out += [
            {
                "id": f"a{rid}:{a.name}",
                "kind": "action",
                "name": a.name,
                "mode": a.mode,
                "origin": a.origin.value[0].upper(),
                "text": self.action_text(a),
            }
            for a in r.actions
        ]
        return out + [self.reaction(rid, x, len(xs) > 1) for x in xs]

    @staticmethod
    def timer_text(t: TimerSpec) -> list[str]:
        if t.offset == 0 and not t.period:
            return []
        return [f"({format_time(t.offset)}, {format_time(t.period or 0)})"]

    @staticmethod
    def action_text(a: ActionSpec) -> list[str]:
        text = [f"min delay: {format_time(a.min_delay)}"] if a.min_delay else []
        if a.min_spacing is not None:
            text.append(f"min spacing: {format_time(a.min_spacing)}")
        return text + ([f"policy: {a.policy.value}"] if a.policy != Policy.DEFER else [])

    def reaction(self, rid: int, x: ReactionSpec, numbered: bool) -> dict:
        """One reaction, merged over the bank members (levels, workers and times of them all)."""
        same = [self.by_index[m, x.index] for m in self.members[rid]]
        timed = [self.times.get((self.reactors[m.reactor].name, m.index), (0.0, 0)) for m in same]
        us, calls = sum(t for t, _ in timed), sum(n for _, n in timed)
        return {
            "id": f"x{x.id}",
            "kind": "reaction",
            "n": reaction_number(x.index),
            "numbered": numbered,
            "name": x.name,
            "label": x.label,
            "mode": x.mode,
            "deadline": format_time(x.deadline),
            "inferred_deadline": format_time(x.inferred_deadline),
            "levels": sorted({m.level for m in same}),
            "ranks": sorted({m.rank for m in same}),
            "workers": sorted({self.worker_of[m.reactor] for m in same}),
            "triggers": [self.ref_text(rid, t) for t in x.triggers],
            "file": x.file,
            "line": x.line,
            "us": us if calls else None,
            "calls": calls,
        }

    def ref_text(self, rid: int, ref: Ref) -> str:
        """A trigger as written in the reaction's signature: ``t``, ``inp``, ``c.out``."""
        if isinstance(ref, PortRef) and self.rep[ref.reactor] != rid:
            return f"{self.reactors[ref.reactor].short}.{ref.name}"
        return ref.kind.value if isinstance(ref, BuiltinTrigger) else ref.name

    def endpoint(self, rid: int, ref: Ref, side: str) -> str | None:
        """The ELK port id of a trigger/source/effect of a reaction of ``rid``."""
        if isinstance(ref, PortRef):
            owner = ref.reactor
            return None if owner in self.hidden else f"r{self.rep[owner]}:{ref.name}"
        if isinstance(ref, BuiltinTrigger):
            return f"{_PREFIX[ref.kind.value]}{rid}:{side}"
        if isinstance(ref, TimerRef):
            return f"t{rid}:{ref.name}:{side}"
        return f"a{rid}:{ref.name}:{side}" if isinstance(ref, ActionRef) else None

    def add_reaction_edges(self, rid: int, x: ReactionSpec) -> None:
        me = f"x{x.id}"
        for ref in x.triggers + x.sources:
            src = self.endpoint(rid, ref, "o")
            if src:
                self.add_edge(rid, src, f"{me}:i", "dep", source=ref in x.sources)
        for ref in x.effects:
            if isinstance(ref, ModeRef):
                if x.mode:
                    label = ", ".join(self.ref_text(rid, t) for t in x.triggers)
                    self.add_edge(
                        rid,
                        f"{me}:o",
                        f"m{rid}:{ref.name}",
                        "mode",
                        label=label,
                        history=ref.transition == Transition.HISTORY,
                    )
            elif dst := self.endpoint(rid, ref, "i"):
                self.add_edge(rid, f"{me}:o", dst, "dep")

    def add_connection(self, rid: int, conn: Connection) -> None:
        """One connection as written: an edge per pair of ports whose channels it joins."""
        left, right = conn.sources, conn.destinations
        bold = len(left) + len(right) > 2 or any(self.width(i, p) > 1 for i, p in left + right)
        for i, j in self.port_pairs(left, right, conn.iterated):
            (si, sp), (di, dp) = left[i], right[j]
            self.add_edge(
                rid,
                f"r{self.rep[si]}:{sp}",
                f"r{self.rep[di]}:{dp}",
                "conn",
                label=format_time(conn.delay),
                physical=conn.physical,
                bold=bold,
                iterated=conn.iterated,
                line=conn.line,
                user_label=conn.label,
            )

    def port_pairs(
        self, left: tuple[PortKey, ...], right: tuple[PortKey, ...], iterated: bool
    ) -> set[tuple[int, int]]:
        """Indices (i, j) such that some channel of ``left[i]`` flows into ``right[j]``."""
        starts, total = [], 0
        for i, p in left:
            starts.append(total)
            total += self.width(i, p)
        pairs, k = set(), 0
        for j, (i, p) in enumerate(right):
            for _ in range(self.width(i, p)):
                if total and (iterated or k < total):
                    src = k % total
                    pairs.add((bisect.bisect_right(starts, src) - 1, j))
                k += 1
        return pairs

    def width(self, rid: int, port: str) -> int:
        p = self.reactors[rid].port(port)
        assert p is not None, f"{self.reactors[rid].name} has no port {port}"
        return 1 if p.width == PLAIN_WIDTH else max(p.width, 0)

    def add_edge(self, rid: int, src: str, dst: str, kind: str, **info: object) -> None:
        key = (src, dst, kind, info.get("label"))
        if key not in self.edges[rid]:
            self.edges[rid][key] = {
                "id": f"e{rid}_{len(self.edges[rid])}",
                "src": src,
                "dst": dst,
                "kind": kind,
                **info,
            }


def render(program: Program, times: Times | None = None) -> str:
    """The complete HTML page for ``program`` (read from graph.json)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # graph.json may come from anyone: its names are text, never markup
        keep_trailing_newline=True,
    )
    # ``tojson`` writes ``<``, ``>``, ``&`` and ``'`` in strings as ``\\u003c``...: no name can
    # end the script element or open a comment or another script in it
    env.policies["json.dumps_kwargs"] = {"separators": (",", ":")}
    return env.get_template("viewer.html.j2").render(
        title=program.name,
        data=Diagram(program, times).to_dict(),
        elk_js=ELK_JS.read_text(),
        elk_version=ELK_VERSION,
    )


def write_html(
    graph_json: str | Path, out: str | Path | None = None, trace: str | Path | None = None
) -> Path:
    """Read ``graph_json`` (and ``trace``), write the page beside it (or to ``out``); its path."""
    graph_json = Path(graph_json)
    program = Program.load(str(graph_json))
    path = Path(out) if out else graph_json.with_name("graph.html")
    path.write_text(render(program, load_trace(trace) if trace else None), encoding="utf-8")
    return path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lfc-graph",
        description="Draw a program's graph.json (written by lfc) as one "
        "self-contained HTML page, laid out by ELK; optionally coloured by a timing trace.",
    )
    p.add_argument("graphs", nargs="+", metavar="GRAPH.json")
    p.add_argument(
        "-o",
        "--output",
        metavar="HTML",
        help="output file (one GRAPH.json only; default: graph.html beside it)",
    )
    p.add_argument(
        "-t",
        "--trace",
        metavar="TRACE.json",
        help="Chrome/Perfetto trace events: name = reaction full name, dur in µs",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Write one page per graph.json named; print each path. Exit 1 on an unreadable input."""
    args = _parser().parse_args(argv)
    if args.output and len(args.graphs) > 1:
        print("lfc-graph: error: -o needs exactly one GRAPH.json", file=sys.stderr)
        return 1
    try:
        for g in args.graphs:
            print(write_html(g, args.output, args.trace))
    except (OSError, ValueError, GraphError) as e:  # unreadable, not JSON, not a graph.json
        print(f"lfc-graph: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
