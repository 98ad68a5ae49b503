"""When and where a run's snapshots are taken: the policy of the command line
(``--checkpoint-every``, ``--checkpoint-every-tags``, ``--checkpoint-dir``,
``--checkpoint-keep``), the program's own, and the one a resumed run keeps.

**The program's own policy.** A main reactor that defines the method
``lf_checkpoint_policy(self)`` (:data:`PROGRAM_POLICY`, e.g. in a preamble inside the main
reactor) gives the policy of a run whose command line asks for no checkpoints: it returns a
:class:`Policy` (its ``timeout`` is ignored) or None for none; a Policy that takes no
snapshots may still name the directory. It is called once the run has begun, after the first
tag, in every worker (on the main reactor's shell where the worker does not run it), so it
may read the main reactor's parameters, ``lf.time.start()`` and ``lf.run_id()`` (e.g. to
name a directory inside the run's own folder), but it must give every worker the same answer.

**Which wins** (:meth:`PolicySources.resolve`). When to snapshot and how many to keep: the
command line's if it asks for snapshots, else, in a resumed run, the policy its snapshot's
manifest keeps (:func:`kept_policy`: a resumed run goes on as the run it continues did), else
the program's own. Where: ``--checkpoint-dir`` if given, else, in a resumed run, the
directory of the snapshot it resumes from, else the program's own directory (an RL program's
``checkpoints/`` in its run directory, also for ``--checkpoint-every...`` given on its
command line), else ``checkpoints/`` in the current directory. The snapshots themselves:
:mod:`reactors.records.checkpoint`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .snapshot import SnapshotError

if TYPE_CHECKING:
    from ..core.assembly import Assembly

#: The main reactor's method that gives the program's own checkpoint policy.
PROGRAM_POLICY = "lf_checkpoint_policy"


@dataclasses.dataclass(frozen=True)
class Policy:
    """When and where to checkpoint: ``every_ns`` (logical time, ns) or ``every_tags``
    (both None: never), into ``directory``, keeping the last ``keep`` snapshots.
    ``timeout``: the run's timeout (ns or None), to tell a stop request from it."""

    every_ns: int | None = None
    every_tags: int | None = None
    directory: str = "checkpoints"
    keep: int = 3
    timeout: int | None = None

    @property
    def active(self) -> bool:
        """Whether snapshots are taken at all."""
        return bool(self.every_ns or self.every_tags)


@dataclasses.dataclass(frozen=True)
class PolicySources:
    """Where the policy of a run comes from, resolved once the run has begun (see the
    module's docstring): ``given``, the command line's (its timing inactive when it asks for
    none) and ``given_directory``, whether it named the directory; ``ask``, the main
    reactor's bound :data:`PROGRAM_POLICY` method, or None; ``kept``, in a resumed run, the
    policy its snapshot's manifest keeps (None in a snapshot older than that) and the
    snapshot's directory."""

    given: Policy
    given_directory: bool = False
    ask: Callable[[], Policy | None] | None = None
    kept: tuple[dict[str, Any] | None, str] | None = None

    def resolve(self) -> Policy | None:
        """The policy to follow (None: no snapshots), its directory made.

        Raises:
            SnapshotError: the program's method returned something else than a Policy or
                None, or the directory cannot be made.
        """
        timing = self._timing()
        if timing is None or not timing.active:
            return None
        policy = dataclasses.replace(
            timing, directory=self._directory(), timeout=self.given.timeout
        )
        try:
            os.makedirs(policy.directory, exist_ok=True)
        except OSError as e:
            raise SnapshotError(
                f"cannot make the checkpoint directory {policy.directory}: {e}"
            ) from None
        return policy

    def _timing(self) -> Policy | None:
        if self.given.active:
            return self.given
        if self.kept is not None and self.kept[0]:
            return Policy(**self.kept[0])
        return self._asked

    def _directory(self) -> str:
        if self.given_directory:
            return self.given.directory
        if self.kept is not None:
            return self.kept[1]
        asked = self._asked
        return asked.directory if asked is not None else self.given.directory

    @functools.cached_property
    def _asked(self) -> Policy | None:
        """The program's own policy (its method called once), or None."""
        if self.ask is None:
            return None
        policy = self.ask()
        if policy is not None and not isinstance(policy, Policy):
            raise SnapshotError(
                f"the main reactor's {PROGRAM_POLICY}() returned {type(policy).__name__}, "
                "not a reactors.records.checkpoint_policy.Policy or None"
            )
        return policy


def policy_sources(
    program: Assembly, opts: Any, resumed: tuple[dict[str, Any], str] | None
) -> PolicySources | None:
    """Where the policy of a run of ``program`` with the launcher's options ``opts`` comes
    from (None when nothing could ask for snapshots); ``resumed``: the manifest and the path
    of the snapshot the run continues from, if any."""
    main = next((i.obj for i in program.instances if i.parent is None), None)
    ask = getattr(main, PROGRAM_POLICY, None)
    kept = None if resumed is None else (resumed[0].get("policy"), os.path.dirname(resumed[1]))
    given = policy_of(opts)
    if not given.active and ask is None and (kept is None or not kept[0]):
        return None
    return PolicySources(given, bool(getattr(opts, "checkpoint_dir_given", False)), ask, kept)


def kept_policy(policy: Policy) -> dict[str, Any]:
    """What a manifest keeps of a run's policy, for the run that resumes from it."""
    return {"every_ns": policy.every_ns, "every_tags": policy.every_tags, "keep": policy.keep}


def policy_of(opts: Any) -> Policy:
    """The checkpoint policy of the launcher's options ``opts``."""
    return Policy(
        every_ns=opts.checkpoint_every,
        every_tags=opts.checkpoint_every_tags,
        directory=opts.checkpoint_dir,
        keep=opts.checkpoint_keep,
        timeout=opts.timeout,
    )
