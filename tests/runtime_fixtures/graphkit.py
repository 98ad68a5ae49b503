"""A tiny stand-in for the compiler's back end, for runtime tests.

Tests describe a program as reactor classes (written like generated code) plus instances,
reactions and connections; :class:`Kit` turns that into a graph.json dict following
docs/PROGRAM.md (levels, inferred deadlines and ranks computed as spec §3.5 says) and a module
object, and runs it through ``reactors.launch.run_graph``.

Trigger/source/effect items:
``"startup"``, ``"shutdown"``, ``"reset"``, ``("timer", name)``, ``("action", name)``,
``("port", reactor_id, name)``, ``("mode", name, "reset"|"history")`` (effects only).
"""

from __future__ import annotations

import types

from reactors.launch import run_graph


def act(name, origin="logical", min_delay=0, min_spacing=None, policy="defer", mode=None):
    """An action entry of graph.json."""
    return {
        "name": name,
        "origin": origin,
        "min_delay": min_delay,
        "min_spacing": min_spacing,
        "policy": policy,
        "mode": mode,
    }


class Kit:
    """Builds a graph dict and module for one test program."""

    def __init__(self, name="Main", **target):
        self.name = name
        self.module = types.ModuleType(f"kit_{name}")
        self.module.__file__ = None
        self.target = {"fast": True, **target}
        self.reactors = []
        self.reactions = []
        self.channels = []
        self.line_map = []

    # ------------------------------------------------------------------ description

    def add(
        self,
        short,
        cls,
        parent=None,
        params=None,
        ports=(),
        timers=(),
        actions=(),
        modes=(),
        mode=None,
        bank_index=0,
    ):
        """Add an instance; returns its id. ``ports``: names or (name, width);
        ``timers``: (name, offset, period[, mode]); ``modes``: names, the first initial."""
        rid = len(self.reactors)
        name = short if parent is None else f"{self.reactors[parent]['name']}.{short}"
        pyclass = f"_{cls.__name__}_{rid}"
        setattr(self.module, pyclass, cls)
        fn = f"_lf_params_{rid}"
        params = params or {}
        setattr(self.module, fn, params if callable(params) else (lambda p, b, d=params: dict(d)))
        self.reactors.append(
            {
                "id": rid,
                "name": name,
                "short": short,
                "class": cls.__name__,
                "pyclass": pyclass,
                "parent": parent,
                "bank_index": bank_index,
                "bank_width": 1,
                "params": fn,
                "mode": mode,
                "synthetic": None,
                "file": "test.lf",
                "line": 1,
                "label": None,
                "worker": 0,
                "ports": [
                    {"name": p, "kind": "port", "width": -2, "mutable": False}
                    if isinstance(p, str)
                    else {"name": p[0], "kind": "port", "width": p[1], "mutable": False}
                    for p in ports
                ],
                "timers": [
                    {
                        "name": t[0],
                        "offset": t[1],
                        "period": t[2],
                        "mode": t[3] if len(t) > 3 else None,
                    }
                    for t in timers
                ],
                "actions": list(actions),
                "modes": [{"name": m, "initial": i == 0} for i, m in enumerate(modes)],
                "reactions": [],
            }
        )
        return rid

    def reaction(
        self,
        rid,
        triggers=(),
        sources=(),
        effects=(),
        args=None,
        deadline=None,
        mode=None,
        name=None,
        function=None,
        mutable=(),
    ):
        """Add the next reaction of instance ``rid``; returns its id. ``args`` defaults to
        one argument per distinct port/action/mode (own ports by name, contained ports as a
        ``contained`` capsule named after the child); ``mutable`` names own inputs passed
        as mutable copies."""
        index = len(self.reactors[rid]["reactions"])
        xid = len(self.reactions)
        self.reactors[rid]["reactions"].append(xid)
        if args is None:
            args = self._default_args(rid, [*triggers, *sources, *effects], mutable)
        self.reactions.append(
            {
                "id": xid,
                "reactor": rid,
                "index": index,
                "name": name,
                "label": None,
                "function": function or f"reaction_function_{index}",
                "deadline": deadline,
                "deadline_function": None if deadline is None else f"deadline_function_{index}",
                "mode": mode,
                "triggers": [self._item(rid, t) for t in triggers],
                "sources": [self._item(rid, t) for t in sources],
                "effects": [self._item(rid, t) for t in effects],
                "args": args,
                "level": 0,
                "inferred_deadline": None,
                "rank": 0,
                "file": "test.lf",
                "line": 1,
            }
        )
        return xid

    def connect(self, src, sport, dst, dport, width=1, src_ch=0, dst_ch=0):
        """Connect ``width`` channels of ``src.sport`` to ``dst.dport`` (zero delay)."""
        for i in range(width):
            self.channels.append([src, sport, src_ch + i, dst, dport, dst_ch + i])

    @staticmethod
    def _item(rid, t):
        if isinstance(t, str):
            return {"kind": t}
        kind = t[0]
        if kind == "port":
            return {"kind": "port", "reactor": t[1], "name": t[2]}
        if kind == "mode":
            return {"kind": "mode", "name": t[1], "transition": t[2]}
        return {"kind": kind, "name": t[1]}

    def _default_args(self, rid, items, mutable):
        args, seen, contained = [], set(), {}
        for t in items:
            if isinstance(t, str) or t[0] == "timer" or t in seen:
                continue
            seen.add(t)
            if t[0] == "action":
                args.append({"name": t[1], "kind": "action", "action": t[1]})
            elif t[0] == "mode":
                args.append({"name": t[1], "kind": "mode", "mode": t[1], "transition": t[2]})
            elif t[1] == rid:
                kind = "mutable" if t[2] in mutable else "port"
                args.append({"name": t[2], "kind": kind, "reactor": rid, "port": t[2]})
            elif t[1] in contained:
                contained[t[1]]["ports"].append(t[2])
            else:
                contained[t[1]] = {
                    "name": self.reactors[t[1]]["short"],
                    "kind": "contained",
                    "reactor": t[1],
                    "ports": [t[2]],
                }
                args.append(contained[t[1]])
        return args

    # ------------------------------------------------------------------ analysis

    def graph(self):
        """The graph.json dict, with levels, inferred deadlines and ranks filled in."""
        rx = self.reactions
        succ = {r["id"]: set() for r in rx}
        by_reactor = {}
        for r in rx:
            by_reactor.setdefault(r["reactor"], []).append(r)
        for rs in by_reactor.values():
            for a, b in zip(rs, rs[1:]):
                succ[a["id"]].add(b["id"])
        down = {}
        for c in self.channels:
            down.setdefault((c[0], c[1]), set()).add((c[3], c[4]))
        readers = {}
        for r in rx:
            for t in r["triggers"] + r["sources"]:
                if t["kind"] == "port":
                    readers.setdefault((t["reactor"], t["name"]), []).append(r)
        for r in rx:
            for e in r["effects"]:
                if e["kind"] != "port":
                    continue
                todo, seen = [(e["reactor"], e["name"])], set()
                while todo:
                    p = todo.pop()
                    if p in seen:
                        continue
                    seen.add(p)
                    for q in readers.get(p, []):
                        if q is r:
                            continue
                        if (
                            q["reactor"] == r["reactor"]
                            and q["mode"] != r["mode"]
                            and q["mode"]
                            and r["mode"]
                        ):
                            continue
                        succ[r["id"]].add(q["id"])
                    todo.extend(down.get(p, ()))
        level = {}

        def lvl(i, stack=()):
            if i in stack:
                raise ValueError("causality cycle in test graph")
            if i not in level:
                preds = [a for a, bs in succ.items() if i in bs]
                level[i] = 1 + max((lvl(a, stack + (i,)) for a in preds), default=-1)
            return level[i]

        inf = {}

        def inferred(i):
            if i not in inf:
                own = rx[i]["deadline"]
                vals = [v for v in [own, *(inferred(b) for b in succ[i])] if v is not None]
                inf[i] = min(vals) if vals else None
            return inf[i]

        for r in rx:
            r["level"] = lvl(r["id"])
            r["inferred_deadline"] = inferred(r["id"])
        big = 1 << 63
        order = sorted(
            rx,
            key=lambda r: (
                big if r["inferred_deadline"] is None else r["inferred_deadline"],
                r["level"],
                r["reactor"],
                r["index"],
            ),
        )
        for rank, r in enumerate(order):
            r["rank"] = rank
        return {
            "version": 1,
            "name": self.name,
            "main_file": "/tmp/test.lf",
            "source_directory": "/tmp/src",
            "package_directory": "/tmp",
            "module": "test.py",
            "target": self.target,
            "reactors": self.reactors,
            "reactions": rx,
            "channels": self.channels,
            "connections": [],
            "line_map": self.line_map,
        }

    def run(self, *args):
        """Build and run; returns the exit status."""
        return run_graph(self.module, self.graph(), args)
