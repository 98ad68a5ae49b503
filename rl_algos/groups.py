"""Environment groups: pipelined (double-buffered) sampling with deterministic results.

Source: the double-buffered sampling of Sample Factory (Petrenko, Huang, Kumar, Sukhatme,
Koltun 2020, "Sample Factory: Egocentric 3D Control from Pixels at 100000 FPS with
Asynchronous Reinforcement Learning", ICML): each rollout worker splits its environments
into two groups and steps one while the policy computes the actions of the other. Here the overlap is in logical time, so it is the same on any worker count:

- member ``m`` of a bank of environment reactors belongs to group ``m % groups``
  (:func:`group_of`: interleaved, so a worker holding consecutive members holds every group);
- with ``P`` the step period (the delay of the action connection), the policy acts for group
  ``g`` at the tags ``j * P`` with ``j % groups == g`` (:func:`turn_delay`), holding a group's
  observations from the tag they arrive until its turn. Group ``g`` then steps at the tags
  ``j * P`` with ``j % groups == (g + 1) % groups``: at every tag one group steps while the
  policy acts for another, with no dependency between the two;
- the learner reassembles whole steps (the ``k``-th step of every member, in member order:
  :class:`RolloutJoin`), so its rollouts are complete and ordered as in a synchronous run.

With one group this is the synchronous schedule: every member steps at every tag and the
policy acts as their observations arrive.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from .config import ConfigError
from .envs import EnvStep
from .ppo import ActRecord, concat_records


def check_env_groups(groups: object, members: int) -> int:
    """``groups`` when it is a valid ``env_groups`` for a bank of ``members`` environment
    reactors: a positive integer that divides ``members``. Raises
    :class:`~rl_algos.config.ConfigError` (a one-line error when a program starts) naming
    the parameter otherwise."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ConfigError(f"env_groups = {groups!r}: must be a positive integer")
    if members % groups:
        raise ConfigError(
            f"env_groups = {groups}: must divide members ({members}): each group gets "
            f"members / env_groups environment reactors"
        )
    return groups


def group_of(member: int, groups: int) -> int:
    """The group of environment member ``member`` (0-based, in the bank's order)."""
    return member % groups


def turn_delay(group: int, groups: int, elapsed: int, period: int) -> int:
    """Nanoseconds from logical time ``elapsed`` (ns since the start, a multiple of
    ``period``) to the policy's next turn for ``group``: the first tag ``j * period`` with
    ``j >= elapsed / period`` and ``j % groups == group``. 0 when the turn is now.
    Raises ValueError when ``elapsed`` is not a multiple of ``period``."""
    j, rest = divmod(elapsed, period)
    if rest:
        raise ValueError(
            f"a step arrived at {elapsed} ns, not a multiple of the step period {period} ns: "
            "the policy's `period` must be the delay of the action connection"
        )
    return (group - j) % groups * period


def split_record(record: ActRecord, sizes: Sequence[int]) -> list[ActRecord]:
    """``record``'s rows cut into consecutive parts of ``sizes`` rows (one per member).
    Raises RuntimeError when the sizes do not add up to its rows."""
    check_rows(record, sizes)
    ends = np.cumsum(sizes)[:-1]
    parts = zip(*(np.split(a, ends) for a in (record.actions, record.logp, record.values)))
    return [ActRecord(*p) for p in parts]


def check_rows(record: ActRecord, sizes: Sequence[int]) -> None:
    """RuntimeError unless ``record`` has ``sum(sizes)`` rows (one per environment)."""
    if sum(sizes) != len(record.actions):
        raise RuntimeError(
            f"the policy records hold {len(record.actions)} actions for {sum(sizes)} "
            "environments stepped at this tag"
        )


class RolloutJoin:
    """Whole steps of a bank of ``members`` environment reactors from their groups' steps,
    which arrive at different tags: what a learner observes.

    :meth:`add` takes the members present at a tag, their :class:`~rl_algos.envs.EnvStep` s
    and the policies' record of the actions that led to them (None after the first reset),
    and returns every step that is now complete: ``(steps, record)`` with the ``k``-th
    EnvStep of every member in member order and the matching rows of their records joined
    in that order (None for the reset). A member's items wait in its queue until every
    member has one. When all members arrive together with nothing waiting (one group), the
    input is returned as is.
    """

    def __init__(self, members: int) -> None:
        self.queues: list[deque[tuple[EnvStep, ActRecord | None]]] = [
            deque() for _ in range(members)
        ]
        self.waiting = 0  # items in the queues

    def add(
        self, present: Sequence[int], steps: Sequence[EnvStep], record: ActRecord | None
    ) -> list[tuple[list[EnvStep], ActRecord | None]]:
        """Queue one tag's steps of the members ``present`` (increasing); return the
        complete steps (see the class). Raises RuntimeError when ``record`` does not cover
        exactly their environments."""
        if len(present) == len(self.queues) and not self.waiting:
            if record is not None:
                check_rows(record, [len(s.obs) for s in steps])
            return [(list(steps), record)]
        rows: Sequence[ActRecord | None] = [None] * len(steps)
        if record is not None:
            rows = split_record(record, [len(s.obs) for s in steps])
        for m, step, row in zip(present, steps, rows):
            self.queues[m].append((step, row))
        self.waiting += len(present)
        done = []
        while all(self.queues):
            done.append(self._pop())
        return done

    def _pop(self) -> tuple[list[EnvStep], ActRecord | None]:
        """The oldest item of every member, joined in member order."""
        items = [q.popleft() for q in self.queues]
        self.waiting -= len(items)
        recs = [r for _, r in items if r is not None]
        if recs and len(recs) != len(items):
            raise RuntimeError("a step of some members came with the policy's record, not all")
        return [s for s, _ in items], concat_records(recs) if recs else None
