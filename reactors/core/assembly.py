"""The runtime objects of a program on one worker, as :func:`reactors.model.build.build` makes
them from the program model: what a scheduler runs.

An :class:`Assembly` holds plain objects of this layer (instances, channel ports, actions,
timers, reactions ordered by rank, modes) and nothing of the model, so that the schedulers
(:class:`reactors.core.scheduler.Scheduler`, the parallel worker's) need only the core.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .action import Action
from .errors import SourceMap
from .mode import ModalState, Mode, ModeCapsule, ModeSystem
from .port import Port
from .reaction import Reaction
from .timer import Timer


@dataclass
class Instance:
    """One reactor instance: its id (its index in the program model's ``reactors``), its
    full name, the Python object (None where this worker does not build it), its container
    and its modal context."""

    id: int
    name: str
    obj: object
    parent: Instance | None
    enclosing: Mode | None = None
    modal: ModalState | None = None


@dataclass
class Assembly:
    """Everything a scheduler needs; ``reactions`` is indexed by (dense) rank."""

    name: str
    instances: list[Instance]
    reactions: list[Reaction | None]
    ports: list[Port]
    actions: list[Action]
    timers: list[Timer]
    startup: list[int]  # ranks of startup reactions outside modes
    shutdown: list[Reaction]  # Reaction objects triggered by shutdown
    modes: ModeSystem
    mode_capsules: list[ModeCapsule]
    source_map: SourceMap
    source_directory: str = ""
    package_directory: str = ""
    physical_actions: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
