"""A multi-process run started before the generated module's own code loads.

A program run on several worker processes (``-w 2`` or more, the ``processes`` backend) needs
nothing of its module in its own process: the supervisor starts the workers, each of which
loads the module itself (spawn runs it as ``__mp_main__``), and waits for the run's end. The
generated module therefore calls :func:`run_before_import` before its preambles: when the run
is such a run, the program's process supervises it without running the preambles' imports
(torch alone takes ~1 s here, which the workers' own imports would otherwise wait for), and
the module ends the process with the run's status. ``--help`` and a command line in error
are answered there too, whatever the run, in the launcher's words (a user who mistyped an
option is not kept waiting for torch to load). Any other run goes the usual way: the module
loads, then ``main()`` runs it.
"""

from __future__ import annotations

import gc
import os
import types
from collections.abc import Sequence

from ..core.errors import LaunchError
from ..core.log import Log
from ..model.program import Program
from ..model.target import DEFAULTS
from ..parallel.plan import workers_for


def run_before_import(path: str, build_id: str, argv: Sequence[str]) -> int | None:
    """Run the program of the generated module at ``path`` (its ``BUILD_ID`` ``build_id``)
    with the options ``argv`` on worker processes, without loading the module here; returns
    the exit status, or None when this run needs the module in this process (one worker,
    ``-w 0``, threads, a cluster, a replay or a resume, or a graph.json that cannot be read:
    the usual path reports it). ``--help`` and a command line in error are answered here,
    whatever the run, without the module's imports (torch: about a second)."""
    from .main import load_program, read_command_line, run_graph

    stand_in = types.ModuleType("__main__")  # what the supervisor reads: path, name, build
    stand_in.__file__ = os.path.abspath(path)
    stand_in.BUILD_ID = build_id  # type: ignore[attr-defined]
    graph_path = os.path.join(os.path.dirname(stand_in.__file__), "graph.json")
    try:
        graph = load_program(stand_in, graph_path)
    except (LaunchError, ValueError, OSError):
        return None
    opts = read_command_line(stand_in, graph, argv)
    if isinstance(opts, int):  # --help answered, or an error in the command line said
        return opts
    if opts.resume:  # a run another process writes is refused before the module's imports
        problem = _resume_refused(graph, opts.resume)
        if problem:
            Log(graph.target.logging or DEFAULTS.logging).error(problem)
            return 1
    if opts.cluster or opts.replay or opts.resume or opts.workers < 2:
        return None
    if workers_for(graph, opts.workers) < 2:
        return None
    from .backends import default_backend

    if (opts.backend or default_backend()) != "processes":
        return None
    gc.enable()  # the module turned it off for its imports, which do not happen here
    return run_graph(stand_in, graph, list(argv))


def _resume_refused(graph: Program, path: str) -> str | None:
    """Why ``--resume path`` cannot go on because another process is writing its run
    (:func:`reactors.records.checkpoint.hold_resumed`: the lock is then this process's), or
    None."""
    from ..records.checkpoint import hold_resumed
    from ..records.snapshot import SnapshotError

    try:
        hold_resumed(path, graph)
    except SnapshotError as e:
        return str(e)
    return None
