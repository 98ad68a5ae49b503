"""The backends a run on several workers can use (``--backend``, ``--cluster``), and running a
program on W > 1 workers with one.

``run(module, graph, opts, log, workers)`` is what :mod:`reactors.launch.main` calls when the
resolved number of workers (:func:`workers_for`) is above one. It makes the plan
(:mod:`reactors.parallel.plan`), picks the transport named by ``--backend`` from :data:`BACKENDS`
(``processes`` by default on a GIL build of CPython, ``threads`` on a free-threaded one), and
hands both to the supervisor (:mod:`reactors.parallel.supervisor`). Every transport runs the same
worker life (:mod:`reactors.parallel.worker_main`): a
:class:`reactors.parallel.worker_scheduler.WorkerScheduler` in every worker, worker 0 also running
the :class:`reactors.parallel.coordinator.Coordinator`; transports differ only in how workers are
started and how the control block, bells and channels are provided
(:class:`reactors.parallel.transport.Transport`).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ..core.errors import ClusterError
from ..core.log import Log
from ..model.program import Program
from ..parallel import supervisor
from ..parallel.contention import usable_cores
from ..parallel.plan import Plan, make_plan, workers_for
from ..parallel.processes import ProcessTransport
from ..parallel.shm import SharedMemoryFull
from ..parallel.threads import ThreadTransport
from ..parallel.transport import Transport

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


def crowded(workers: int, cores: int, oversubscribe: bool, log: Log) -> int:
    """How many workers run a request for ``workers`` on a host where this process may use
    ``cores`` cores: all of them up to the cores; beyond, one per core (as Ray's scheduler runs
    at most as many tasks at once as there are CPUs and queues the rest), unless
    ``oversubscribe`` asks for every one (then some wait for a core at every tag:
    docs/parallel.md, "More workers than cores"). Beyond the cores it says once on stderr
    which it does."""
    if workers <= cores:
        return workers
    if oversubscribe:
        log.warn(
            f"{workers} workers on {cores} core(s), --oversubscribe: more workers than cores "
            f"take turns on them at every tag, which is slower than -w {cores}"
        )
        return workers
    log.warn(
        f"-w {workers} on {cores} core(s): running {cores} workers, one per core "
        f"(--oversubscribe runs {workers}); -w 0 chooses at most {cores}"
    )
    return cores


def run(module: ModuleType, graph: Program, opts: Any, log: Log, workers: int) -> int:
    """Run on ``workers`` (> 1) workers with ``opts.backend`` (the launcher's options);
    returns the exit status. Raises KeyError for a backend not in :data:`BACKENDS`."""
    backend = opts.backend or default_backend()
    transport = BACKENDS[backend]
    if getattr(opts, "cluster", None):  # Ray is imported only then
        from ..cluster.ray_transport import RayTransport

        backend = "Ray actors"
        transport = functools.partial(RayTransport, address=opts.cluster)
    if backend == "processes" or (backend == "threads" and default_backend() == "threads"):
        workers = crowded(workers, usable_cores(), getattr(opts, "oversubscribe", False), log)
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
