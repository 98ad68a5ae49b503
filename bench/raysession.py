"""A local Ray session for the peers of the paper's workloads.

Ray is a benchmark-only dependency (``pip install -e .[bench]``). Actors import the shared
workload code from ``lf_src/bench`` and ``bench``, so both go on the workers' PYTHONPATH.
Compiled Graphs are given a generous ``get`` timeout: on a 2-core machine with 15 actors the
first executions take seconds.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

from .common import ROOT, cores
from .programs import LF_BENCH

#: seconds a Compiled Graph execution may take before Ray calls it hung
CGRAPH_TIMEOUT_S = 300


@contextmanager
def ray_session():
    """``ray.init`` on this machine (one CPU per core, no dashboard); ``ray.shutdown`` after.

    Yields the ``ray`` module. Raises ImportError when Ray is not installed.
    """
    os.environ["RAY_CGRAPH_get_timeout"] = str(CGRAPH_TIMEOUT_S)
    os.environ["RAY_CGRAPH_submit_timeout"] = str(CGRAPH_TIMEOUT_S)
    import ray

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(LF_BENCH), str(ROOT), saved) if p)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        if ray.is_initialized():
            ray.shutdown()
        ray.init(
            num_cpus=cores(),
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
            configure_logging=True,
        )
        yield ray
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@contextmanager
def ray_or_skip(tables, names):
    """A :func:`ray_session` for the peer rows ``names`` of every table in ``tables``.

    Yields the ``ray`` module, or None after marking each of those rows skipped with the reason
    when Ray cannot start (not installed, init failure): a failed peer keeps its row.
    """
    try:
        session = ray_session()
        ray = session.__enter__()
    except Exception as e:  # noqa: BLE001 - every failure becomes a row
        for t in tables:
            for name in names:
                t.skip(name, f"Ray unavailable: {type(e).__name__}: {e}")
        yield None
        return
    try:
        yield ray
    finally:
        session.__exit__(None, None, None)


def rate(rounds: int, warmup: int, one_round) -> float:
    """Seconds per round of ``one_round(i)``, after ``warmup`` untimed rounds."""
    for i in range(warmup):
        one_round(i)
    t0 = time.perf_counter()
    for i in range(rounds):
        one_round(warmup + i)
    return (time.perf_counter() - t0) / rounds


@contextmanager
def compiled(dag):
    """``dag.experimental_compile()``; torn down after use (its actors stay alive)."""
    graph = dag.experimental_compile()
    try:
        yield graph
    finally:
        graph.teardown()
