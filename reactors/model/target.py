"""Target properties a program runs with (spec §1.3): one place for their defaults.

The compiler reads the ``target`` declaration of a ``.lf`` file and writes the properties that
matter at run time into graph.json's ``target`` object; a property the file does not set has
the default given here, both in the compiler and in the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.log import DEFAULT_LEVEL


@dataclass(frozen=True)
class TargetSettings:
    """The resolved run-time target properties (graph.json's ``target``); each field's default
    is the program's default. The compiler has already forced ``keepalive`` true when the
    program has physical actions.

    ``timeout``: logical time to stop at, in ns after the start (None: no timeout);
    ``fast``: do not wait for physical time; ``keepalive``: keep running with an empty event
    queue; ``logging``: a level of :data:`reactors.core.log.LEVELS`; ``workers``: worker count
    (0: one per core); ``single_threaded``: always one worker; ``tracing``: write a timing
    trace; ``files``: files copied beside the generated module; ``seed``: the program seed.
    """

    timeout: int | None = None
    fast: bool = False
    keepalive: bool = False
    logging: str = DEFAULT_LEVEL
    workers: int = 1
    single_threaded: bool = False
    tracing: bool = False
    files: tuple[str, ...] = ()
    seed: int = 0


#: The properties of a program whose ``target`` declaration sets none.
DEFAULTS = TargetSettings()
