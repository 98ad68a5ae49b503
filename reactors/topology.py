"""The communication structure of a program, computed from graph.json alone (pure data).

Used by :mod:`reactors.placement` (which reactors must share a worker) and by the parallel
backends (which port channels cross workers, and when in a tag each must be sent and
received). Every worker computes the same answers from the same graph, so nothing here is
ever sent between processes.

Vocabulary: a *channel key* is ``(reactor id, port name, channel index)``; its *root* is the
key reached by following zero-delay connections upstream (docs/PROGRAM.md); every channel of
a root shares the root's value and presence. A reaction is identified by its *rank*: its
position in the order ``(graph rank, id)``, exactly as :func:`reactors.build.build` numbers it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PLAIN = -2  # ``width`` of a port that is not a multiport


def order(graph: dict) -> list:
    """The graph's reactions in rank order (index == dense rank used by the runtime)."""
    return sorted(graph.get("reactions", []), key=lambda r: (r["rank"], r["id"]))


def port_channels(graph: dict) -> dict:
    """``(reactor id, port) -> [channel keys]`` for every port of every instance."""
    out = {}
    for inst in graph["reactors"]:
        for p in inst.get("ports", []):
            w = p.get("width", PLAIN)
            out[(inst["id"], p["name"])] = [
                (inst["id"], p["name"], c) for c in range(1 if w == PLAIN else w)
            ]
    return out


def roots(graph: dict) -> dict:
    """``channel key -> root channel key`` (connection cycles are reported by the build)."""
    up = {(c[3], c[4], c[5]): (c[0], c[1], c[2]) for c in graph.get("channels", [])}
    out = {}
    for chans in port_channels(graph).values():
        for key in chans:
            k, seen = key, set()
            while k in up and k not in seen:
                seen.add(k)
                k = up[k]
            out[key] = k
    return out


def _ports_of(items, ports: dict, root: dict, channels_arg=()) -> set:
    found = set()
    for item in items:
        if item.get("kind") == "port":
            for key in ports.get((item["reactor"], item["name"]), ()):
                found.add(root[key])
    for rid, port, ch in channels_arg:
        found.add(root[(rid, port, ch)])
    return found


@dataclass
class Access:
    """Which reactions (by rank) write and read each root channel.

    ``writes[root]`` / ``reads[root]``: sets of ranks; ``reactor[rank]``: the reactor id of a
    reaction; ``level[rank]``: its level.
    """

    writes: dict = field(default_factory=dict)
    reads: dict = field(default_factory=dict)
    reactor: list = field(default_factory=list)
    level: list = field(default_factory=list)


def access(graph: dict) -> Access:
    """Readers (triggers and sources) and writers (effects) of every root channel."""
    ports, root = port_channels(graph), roots(graph)
    acc = Access()
    for rank, rx in enumerate(order(graph)):
        acc.reactor.append(rx["reactor"])
        acc.level.append(rx.get("level", 0))
        src_arg, dst_arg = (), ()
        for a in rx.get("args", []):
            if a.get("kind") == "channels":
                if a["name"] == "dst":
                    dst_arg = [tuple(c) for c in a["channels"]]
                else:
                    src_arg = [tuple(c) for c in a["channels"]]
        for r in _ports_of(rx.get("effects", []), ports, root, dst_arg):
            acc.writes.setdefault(r, set()).add(rank)
        for r in _ports_of(rx.get("triggers", []) + rx.get("sources", []), ports, root, src_arg):
            acc.reads.setdefault(r, set()).add(rank)
    return acc


@dataclass(frozen=True)
class Crossing:
    """A root channel written in one worker and read in others.

    ``index``: position in the program's sorted list of crossings (names its shared memory);
    ``root``: the root channel key; ``writer``: the writing worker; ``readers``: the other
    workers that read it (sorted); ``last_write``: the highest rank that writes it;
    ``first_read``: reader worker -> the lowest rank there that reads it.
    """

    index: int
    root: tuple
    writer: int
    readers: tuple
    last_write: int
    first_read: dict


def crossings(graph: dict, worker_of: list) -> list:
    """Every root channel whose writer and some reader live in different workers.

    ``worker_of[reactor id]`` is the placement. Sorted by root key (the same in every worker).
    """
    acc = access(graph)
    out = []
    for root in sorted(acc.writes, key=lambda k: (k[0], k[1], k[2])):
        wranks = acc.writes[root]
        writers = {worker_of[acc.reactor[r]] for r in wranks}
        assert len(writers) == 1, f"root {root} has writers in workers {sorted(writers)}"
        w = writers.pop()
        first = {}
        for r in acc.reads.get(root, ()):
            v = worker_of[acc.reactor[r]]
            if v != w:
                first[v] = min(first.get(v, r), r)
        if first:
            out.append(Crossing(len(out), root, w, tuple(sorted(first)), max(wranks), first))
    return out


def ancestors(graph: dict, ids) -> set:
    """``ids`` and all their ancestors (the containers a worker needs to build them)."""
    reactors = graph["reactors"]
    out = set()
    for i in ids:
        while i is not None and i not in out:
            out.add(i)
            i = reactors[i].get("parent")
    return out
