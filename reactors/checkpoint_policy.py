"""When and where a program's snapshots are taken: the policy of the command line
(``--checkpoint-every``, ``--checkpoint-every-tags``, ``--checkpoint-dir``,
``--checkpoint-keep``) or, when it asks for none, the program's own.

**The program's own policy.** A main reactor that defines the method
``lf_checkpoint_policy(self)`` (:data:`PROGRAM_POLICY`, e.g. in a preamble inside the main
reactor) gives the policy of a run whose command line asks for no checkpoints: it returns a
:class:`Policy` (its ``timeout`` is ignored) or None for none. It is called once the run has
begun, after the first tag, in every worker (on the main reactor's shell where the worker does
not run it), so it may read the main reactor's parameters, ``lf.time.start()`` and
``lf.run_id()`` (e.g. to name a directory inside the run's own folder), but it must give every
worker the same answer. A snapshot's manifest keeps that policy (:func:`kept_policy`): a run
resumed from it follows it again, into the snapshot's own directory, without asking the method
(which could name another folder). The snapshots themselves: :mod:`reactors.checkpoint`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .snapshot import SnapshotError

if TYPE_CHECKING:
    from .build import Assembly

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
class ProgramPolicy:
    """The program's own policy, resolved once the run has begun (see the module's
    docstring): ``ask`` is the main reactor's bound :data:`PROGRAM_POLICY` method;
    ``timeout`` the run's (ns or None); ``kept``, in a resumed run whose snapshot was taken by
    the program's policy, that policy (``every_ns``, ``every_tags``, ``keep``) and the
    snapshot's directory, followed instead of asking the method again."""

    ask: Callable[[], Policy | None]
    timeout: int | None = None
    kept: tuple[dict[str, Any], str] | None = None

    def resolve(self) -> Policy | None:
        """The policy to follow (None: no snapshots), its directory made.

        Raises:
            SnapshotError: the method returned something else than a Policy or None, or the
                directory cannot be made.
        """
        if self.kept is not None:
            saved, directory = self.kept
            policy: Policy | None = Policy(**saved, directory=directory)
        else:
            policy = self.ask()
        if policy is None or (isinstance(policy, Policy) and not policy.active):
            return None
        if not isinstance(policy, Policy):
            raise SnapshotError(
                f"the main reactor's {PROGRAM_POLICY}() returned {type(policy).__name__}, "
                "not a reactors.checkpoint_policy.Policy or None"
            )
        try:
            os.makedirs(policy.directory, exist_ok=True)
        except OSError as e:
            raise SnapshotError(
                f"cannot make the checkpoint directory {policy.directory}: {e}"
            ) from None
        return dataclasses.replace(policy, timeout=self.timeout)


def program_policy(
    program: Assembly, timeout: int | None, resumed: tuple[dict[str, Any], str] | None
) -> ProgramPolicy | None:
    """The program's own policy if its main reactor defines :data:`PROGRAM_POLICY` (None if
    not); ``resumed``: the manifest and the path of the snapshot the run continues from, if
    any."""
    main = next((i.obj for i in program.instances if i.parent is None), None)
    ask = getattr(main, PROGRAM_POLICY, None)
    if ask is None:
        return None
    kept = None
    if resumed is not None and resumed[0].get("policy"):
        kept = (resumed[0]["policy"], os.path.dirname(resumed[1]))
    return ProgramPolicy(ask, timeout, kept)


def kept_policy(policy: Policy) -> dict[str, Any]:
    """What a manifest keeps of the program's own policy (see :class:`ProgramPolicy`)."""
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
