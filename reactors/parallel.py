"""Running a program on W > 1 workers: the dispatcher.

``run(module, graph, opts, log, workers)`` is what :mod:`reactors.launch` calls when the
resolved number of workers (:func:`workers_for`) is above one. It makes the plan
(:mod:`reactors.plan`), picks the transport named by ``--backend`` from :data:`BACKENDS`
(``processes`` by default on a GIL build of CPython, ``threads`` on a free-threaded one), and
hands both to the supervisor (:mod:`reactors.supervisor`). Every transport runs the same
worker life (:mod:`reactors.worker_life`): a :class:`reactors.worker.WorkerScheduler` in every
worker, worker 0 also running the :class:`reactors.coordinator.Coordinator`; transports differ
only in how workers are started and how the control block, bells and channels are provided
(:class:`reactors.transport.Transport`).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from . import supervisor
from .errors import ClusterError
from .log import Log
from .plan import Plan, make_plan, workers_for
from .processes import ProcessTransport
from .program import Program
from .shm import SharedMemoryFull
from .threads import ThreadTransport
from .transport import Transport

__all__ = ["BACKENDS", "default_backend", "run", "workers_for"]

BACKENDS: dict[str, Callable[[Plan], Transport]] = {
    "processes": ProcessTransport,
    "threads": ThreadTransport,
}
"""The transports by ``--backend`` name; each is called with the plan to make one run's."""


def default_backend() -> str:
    """``threads`` on a free-threaded CPython (GIL disabled), else ``processes``."""
    gil = getattr(sys, "_is_gil_enabled", None)
    return "threads" if gil is not None and not gil() else "processes"


def run(module: ModuleType, graph: Program, opts: Any, log: Log, workers: int) -> int:
    """Run on ``workers`` (> 1) workers with ``opts.backend`` (the launcher's options);
    returns the exit status. Raises KeyError for a backend not in :data:`BACKENDS`."""
    backend = opts.backend or default_backend()
    transport = BACKENDS[backend]
    if getattr(opts, "cluster", None):  # Ray is imported only then
        from .ray_cluster import RayTransport

        backend = "Ray actors"
        transport = functools.partial(RayTransport, address=opts.cluster)
    plan = make_plan(graph, workers, getattr(opts, "placement", None))
    log.log(f"---- Running on {workers} workers ({backend})")
    if opts.fast and graph.physical_actions and not opts.replay:
        log.warn("fast execution with physical actions: physical tags may lag logical time")
    try:
        chosen = transport(plan)
    except (SharedMemoryFull, ClusterError) as e:
        log.error(str(e))
        return 1
    try:
        return supervisor.run(chosen, module, graph, plan, opts, log)
    except ClusterError as e:  # a worker the cluster could not place or start (cleaned up)
        log.error(str(e))
        return 1
