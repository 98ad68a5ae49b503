"""Reaction costs: measured in a run, kept beside the program, and used to choose the number
of workers (``-w 0``).

More workers pay only when the reactions of a tag outweigh what sharing the tag costs (a
wake-up across workers, values crossing, the end-of-tag exchange). That depends on how long the
reactions take, which only a run can tell. So:

- a run started with ``-w 0`` that has no usable profile (none, or one of an earlier build of
  the program) runs on one worker and measures
  (:class:`Calibrator`): for a few hundred tags after the first ones, it times every reaction
  (wrapping its entry of the dispatch table, then putting the entry back, so the rest of the run
  costs nothing; the median of its calls, times how often it ran per tag); at the end it saves the :class:`Profile` as ``profile.json`` beside
  ``graph.json`` (written atomically; not at all if that folder is not writable);
- a later ``-w 0`` run predicts the time per tag of each worker count with that profile
  (:func:`predict`: the reactions in rank order, each on its placed worker, starting when its
  worker is free and its inputs from other workers have arrived) and takes the fastest
  (:func:`choose`), one worker unless more are predicted at least :data:`GAIN` faster, with
  the rules' placement improved by moving groups of reactors between workers while that lowers
  the prediction (:func:`refine`).

Each ``-w 0`` run writes its choice, with why and the predictions, into graph.json
(``worker_choice``, :func:`explain`) and, with ``--verbose``, on stderr. Which worker runs a
reaction never changes a result, so neither does a profile. A profile is
tied to the build of the program (its ``build_id``) and the main parameters given when it
started: after a rebuild, or with other parameters, the next ``-w 0`` run measures again. Times are ns.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from .. import native
from ..model.json_form import encode
from ..model.program import Prediction, Program, WorkerChoice
from .placement import groups, max_parallel, place
from .topology import Access, access, crossings, order

PROFILE = "profile.json"
#: The program file beside it, where a -w 0 run writes its choice.
GRAPH_FILE = "graph.json"
VERSION = 1
SKIP_TAGS = 3  # tags not measured at the start (start-up reactions, first-call costs)
MEASURE_TAGS = 500  # tags measured
MEASURE_NS = 500_000_000  # at most this long
#: More workers only when predicted at least this much faster: with the costs below the
#: predicted -w 2 / -w 1 ratio of the benchmark programs is within 9% (most within 6%) of the
#: measured one, and passing up a gain smaller than this costs at most 5%.
GAIN = 1.05
REFINE_GROUPS, REFINE_ROUNDS = 64, 4  # placements refined by moving groups: at most
#: What sharing a tag costs (ns): a wake-up of a waiting worker, a value written into or read
#: from a crossing, the end-of-tag exchange; with the runtime's sources and with its compiled
#: modules (:mod:`reactors.native`). Fitted on this 2-core machine (2026-11-24) to the -w 2 /
#: -w 1 ratios of the programs of lf_src/bench/ that bench/parallel_tags.py, gym_sim.py and
#: multi_agent.py run (EnvBank of 16 and of 8 environments, TinyBank, GymSim CartPole,
#: Pendulum and Blackjack, Junction of 4 and 10 agents), each from its own -w 0 profile.
#: Sources: predicted 1.50, 1.89, 0.34, 1.07, 1.29, 1.66, 0.86, 0.92 against measured 1.43,
#: 1.80, 0.32, 1.13, 1.31, 1.52, 0.81, 0.92. Compiled: predicted 1.62, 1.94, 0.37, 1.37, 1.51,
#: 1.75, 0.98, 1.09 (1.06 from a second profile of the junction of 10) against measured 1.65,
#: 1.91, 0.36, 1.38, 1.53, 1.65, 0.98, 1.06-1.07: each on the same side of :data:`GAIN`. The
#: fit puts the compiled wake-up at 0: what waking costs there is in the exchange's constant.
SOURCE_COSTS = (4_000, 700, 8_000)
COMPILED_COSTS = (0, 300, 7_000)
WAKE_NS, VALUE_NS, EXCHANGE_NS = COMPILED_COSTS if native.compiled() else SOURCE_COSTS
#: The wake-up when the cores are busy with other tasks (waiters block instead of spinning).
BUSY_WAKE_NS = 60_000


def build_key(graph: Program) -> str:
    """What a profile is valid for: the program's build and the main parameters given when it
    started (``--iters 90`` may change every reaction's cost)."""
    given = ";".join(f"{a.name}={a.text}" for a in graph.arguments)
    return f"{graph.build_id};{given}" if given else graph.build_id


def reaction_names(graph: Program) -> list[str]:
    """A stable name of every reaction, in rank order: ``<instance>.<reaction index>``."""
    names = {r.id: f"{graph.reactors[r.reactor].name}.{r.index}" for r in graph.reactions}
    return [names[r.id] for r in order(graph)]


@dataclass(frozen=True)
class Profile:
    """Typical ns per tag of every reaction (``cost[name]``; a reaction that ran in a
    fraction of the tags counts that fraction), measured over ``tags`` tags of a run of the
    program with :func:`build_key` ``build_id``."""

    tags: int
    cost: dict[str, float]
    build_id: str = ""

    def per_rank(self, graph: Program) -> list[float] | None:
        """The costs in rank order, or None if the profile is of another build or program."""
        names = reaction_names(graph)
        if self.build_id != build_key(graph) or set(names) != set(self.cost):
            return None
        return [self.cost[n] for n in names]

    def save(self, path: str) -> bool:
        """Write the profile to ``path`` atomically; False if it could not be written."""
        data = {"version": VERSION, "build_id": self.build_id, "tags": self.tags}
        return _write_json(path, {**data, "cost_ns": self.cost})

    @classmethod
    def load(cls, path: str) -> Profile | None:
        """The profile saved at ``path``, or None if there is none or it is unreadable."""
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("version") != VERSION:
                return None
            cost = {str(k): float(v) for k, v in data["cost_ns"].items()}
            return cls(int(data["tags"]), cost, str(data["build_id"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None


class Calibrator:
    """Times the reactions of a one-worker scheduler ``sched`` (its dispatch table) during
    tags ``SKIP_TAGS`` to ``SKIP_TAGS + MEASURE_TAGS`` (or :data:`MEASURE_NS`), then puts the
    table back. ``graph``: the program model."""

    def __init__(self, sched: Any, graph: Program):
        self.sched = sched
        self.names = reaction_names(graph)
        self.build_id = build_key(graph)
        self.table = sched.table
        self.saved = list(self.table)
        self.times: list[list[int]] = [[] for _ in self.table]  # ns of each call, per rank
        self.tag: tuple[int, int] | None = None
        self.seen = 0  # tags seen by a timed reaction
        self.first = 0  # the tag count when measuring started
        self.started_ns = 0
        self.done = False
        self.measured = 0
        for rank, entry in enumerate(self.table):
            if entry is not None:
                self.table[rank] = (self._timed(rank, entry), ())

    def _timed(self, rank: int, entry: tuple[Callable[..., Any], tuple]) -> Callable[[], None]:
        fn, args = entry
        times = self.times[rank]

        def timed() -> None:
            self._tick()
            t0 = perf_counter_ns()
            try:
                fn(*args)
            finally:
                if self.first:
                    times.append(perf_counter_ns() - t0)

        return timed

    def _tick(self) -> None:
        s = self.sched
        tag = (s.time, s.micro)
        if tag == self.tag:
            return
        self.tag = tag
        self.seen += 1
        if self.seen == SKIP_TAGS + 1:
            self.first, self.started_ns = self.seen, perf_counter_ns()
        elif self.first and (
            self.seen - self.first >= MEASURE_TAGS
            or perf_counter_ns() - self.started_ns >= MEASURE_NS
        ):
            self._stop()

    def _stop(self) -> None:
        """Put the reactions' own entries back (the current reaction still finishes timed)."""
        self.table[:] = self.saved
        self.done = True
        self.measured = self.seen - self.first

    def profile(self) -> Profile | None:
        """The measured profile (None if the run ended before anything was measured)."""
        if not self.first:
            return None
        tags = self.measured if self.done else self.seen - self.first + 1
        cost = {
            n: _typical(self.times[r]) * len(self.times[r]) / tags for r, n in enumerate(self.names)
        }
        return Profile(tags, cost, self.build_id)


def _typical(times: list[int]) -> float:
    """The median of a reaction's call times (ns): robust to calls that the OS preempted."""
    import statistics  # here: only a measuring run needs it (4 ms to import)

    return float(statistics.median(times)) if times else 0.0


def predict(
    graph: Program,
    costs: Sequence[float],
    workers: int,
    wake_ns: int = WAKE_NS,
    at: Sequence[int] | None = None,
    acc: Access | None = None,
) -> float:
    """Predicted ns per tag on ``workers`` workers with reaction ``costs`` (ns per tag, in
    rank order): the reactions in rank order, each on the worker its reactor is placed on
    (``at[reactor id]``, default :func:`reactors.parallel.placement.place`), starting when that
    worker is free and, for a reaction that reads a crossing, ``wake_ns`` after its writer
    finished; each crossing value costs its writer and reader :data:`VALUE_NS`, and a tag
    ends with the exchange (:data:`EXCHANGE_NS`) after the last worker finished. ``acc``: the
    program's :func:`reactors.parallel.topology.access` (computed when not given)."""
    if workers <= 1:
        return float(sum(costs))
    if acc is None:
        acc = access(graph)
    if at is None:
        at = place(graph, workers, acc)
    worker = [at[acc.reactor[r]] for r in range(len(costs))]
    crossing_reads: dict[int, list[int]] = {}  # reading rank -> writing ranks elsewhere
    extra = [0.0] * len(costs)
    for c in crossings(graph, list(at), acc):
        writes = sorted(acc.writes[c.root])
        for r in acc.reads.get(c.root, ()):
            if worker[r] != c.writer:
                crossing_reads.setdefault(r, []).extend(writes)
                extra[r] += VALUE_NS
        extra[max(writes)] += VALUE_NS * len(c.readers)
    free = [0.0] * workers
    finish = [0.0] * len(costs)
    for r, cost in enumerate(costs):
        w = worker[r]
        start = free[w]
        for src in crossing_reads.get(r, ()):
            start = max(start, finish[src] + wake_ns)
        finish[r] = free[w] = start + cost + extra[r]
    return max(free) + EXCHANGE_NS


def refine(
    graph: Program,
    costs: Sequence[float],
    workers: int,
    wake_ns: int = WAKE_NS,
    acc: Access | None = None,
) -> tuple[list[int], float]:
    """The placement of :func:`reactors.parallel.placement.place` on ``workers`` workers, improved
    by moving whole groups (:func:`reactors.parallel.placement.groups`; pinned ones stay) to another
    worker while that lowers the predicted time per tag (:func:`predict`) by at least 1%; with
    more than :data:`REFINE_GROUPS` groups, the rules' placement. Returns the placement
    (worker of each reactor id) and its predicted ns per tag. ``acc``: the program's
    :func:`reactors.parallel.topology.access` (computed when not given)."""
    if acc is None:
        acc = access(graph)  # once for the many predictions below
    at = place(graph, workers, acc)
    best = predict(graph, costs, workers, wake_ns, at, acc)
    group = groups(graph, acc)
    pinned = {group[r.id] for r in graph.reactors if r.pin is not None}
    movable = sorted({group[r.id] for r in graph.reactors if r.reactions} - pinned)
    if len(movable) > REFINE_GROUPS:
        return at, best
    members = {g: [i for i, x in enumerate(group) if x == g] for g in movable}
    for _ in range(REFINE_ROUNDS):
        improved = False
        for g in movable:
            here = at[g]
            for w in range(workers):
                if w == here:
                    continue
                trial = list(at)
                for i in members[g]:
                    trial[i] = w
                got = predict(graph, costs, workers, wake_ns, trial, acc)
                if got < best * 0.99:
                    at, best, here, improved = trial, got, w, True
        if not improved:
            break
    return at, best


@dataclass(frozen=True)
class Choice:
    """The worker count chosen by :func:`choose`, the predicted ns per tag of each count
    tried, why (one line, for ``--verbose``), and whether the run should measure (it had no
    usable profile) and the placement to run with (worker of each reactor id; None: the
    rules' placement)."""

    workers: int
    predicted: dict[int, float]
    reason: str
    measure: bool = False
    placement: tuple[int, ...] | None = None
    inputs: str = ""


def explain(graph_path: str, choice: Choice, recorded: WorkerChoice | None = None) -> bool:
    """Write ``choice`` into the program's graph.json at ``graph_path`` (its
    ``worker_choice``: workers, reason, predictions, placement, inputs), atomically, unless
    it is ``recorded`` there already (rewriting the 2 MB file of a program of a thousand
    reactors took 84 ms); False if the file could not be read or written (the run goes on)."""
    made = WorkerChoice(
        choice.workers,
        choice.reason,
        tuple(Prediction(w, round(ns)) for w, ns in sorted(choice.predicted.items())),
        choice.placement or (),
        choice.inputs,
    )
    if made == recorded:
        return True
    return record(graph_path, "worker_choice", made)


def record(graph_path: str, key: str, value: Any) -> bool:
    """Set graph.json's field ``key`` (at ``graph_path``) to ``value`` (a dataclass of
    :mod:`reactors.model.program`, encoded as the file's format says), atomically; False if the
    file could not be read or written (the run goes on)."""
    try:
        with open(graph_path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return False
    data[key] = encode(value)
    return _write_json(graph_path, data, indent=1)


def _write_json(path: str, data: Any, indent: int | None = None) -> bool:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file beside it, renamed);
    False if it could not be written."""
    folder = os.path.dirname(path) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=".json-", dir=folder)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=indent)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def share(workers: int, cores: int, others: int) -> int:
    """How many times slower a tag on ``workers`` workers runs while ``others`` other tasks
    want a core (of ``cores``): 1 while every task has a core; otherwise, for more than one
    worker, the tasks per core rounded up, since the tag waits for its slowest worker and the
    kernel runs each core's tasks in turn. A lone worker keeps its pace: measured on this
    2-core machine, 8 environments of ~132 us per tag took 1,067 us on one worker quiet and
    1,070-1,100 us with one or two busy processes, but 1,240-1,380 us on two workers (600 us
    quiet), the 2x this gives."""
    if workers + others <= cores or workers == 1:
        return 1
    return -(-(workers + others) // cores)


def inputs_key(graph: Program, profile: Profile, cores: int, others: int) -> str:
    """A digest of everything :func:`choose` decides from (the program's build, the profile,
    the cores, the other tasks and this module's constants), so that a choice recorded in
    graph.json (:attr:`reactors.model.program.WorkerChoice.inputs`) can be taken again as it is."""
    model = (WAKE_NS, VALUE_NS, EXCHANGE_NS, BUSY_WAKE_NS, GAIN, REFINE_GROUPS, REFINE_ROUNDS)
    what = [build_key(graph), profile.build_id, profile.tags, profile.cost, cores, others, model]
    text = json.dumps(what, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def choose(
    graph: Program,
    profile: Profile | None,
    cores: int,
    others: int = 0,
    recorded: WorkerChoice | None = None,
) -> Choice:
    """The worker count for ``-w 0``: with a ``profile``, the fastest predicted count up to
    ``cores`` and the program's parallelism (one unless more are :data:`GAIN` faster);
    without a usable one, one worker, which measures (``measure``). ``others``: how many
    other tasks want a core now; a count that leaves a worker without a core of its own is
    predicted with slower wake-ups (:data:`BUSY_WAKE_NS`) and :func:`share`. ``recorded``:
    the choice graph.json holds, taken as it is if it was made from the same inputs
    (:func:`inputs_key`; a program of a thousand reactors takes ~20 ms to weigh)."""
    costs = profile.per_rank(graph) if profile is not None else None
    if costs is None:
        why = (
            "no profile of an earlier run"
            if profile is None
            else "the profile is of another build of the program"
        )
        return Choice(1, {}, f"{why}: one worker, which measures the reactions' costs", True)
    assert profile is not None  # it has costs
    key = inputs_key(graph, profile, cores, others)
    if recorded is not None and recorded.inputs == key:
        weighed = {p.workers: float(p.ns_per_tag) for p in recorded.predicted}
        at = recorded.placement or None
        return Choice(recorded.workers, weighed, recorded.reason, False, at, key)
    acc = access(graph)  # once for every count tried
    top = max(1, min(cores, max_parallel(graph, acc)))
    predicted = {1: predict(graph, costs, 1)}
    placements: dict[int, list[int]] = {}
    for w in range(2, top + 1):
        wake = BUSY_WAKE_NS if w + others > cores else WAKE_NS
        placements[w], predicted[w] = refine(graph, costs, w, wake, acc)
        predicted[w] *= share(w, cores, others)
    best = min(predicted, key=lambda w: (predicted[w], w))
    if best > 1 and predicted[best] * GAIN > predicted[1]:
        best = 1
    shown = ", ".join(f"{w} worker(s) {predicted[w] / 1000:.1f} us" for w in predicted)
    if others:
        shown += f" ({others} other task(s) wanting a core of {cores})"
    placement = tuple(placements[best]) if best > 1 else None
    return Choice(
        best, predicted, f"predicted time per tag: {shown}; chose {best}", False, placement, key
    )


def choose_now(
    graph: Program,
    profile: Profile | None,
    cores: int,
    others_now: Callable[[], int],
    recorded: WorkerChoice | None = None,
) -> Choice:
    """:func:`choose`, counting the other tasks that want a core (``others_now()``, which
    samples for several ms) only when the choice is more than one worker: other tasks only
    slow the predictions of several workers (:func:`share`, :data:`BUSY_WAKE_NS`), so a
    choice of one worker stands whatever they are."""
    choice = choose(graph, profile, cores, 0, recorded)
    if choice.workers == 1:
        return choice
    others = others_now()
    return choice if others == 0 else choose(graph, profile, cores, others, recorded)
