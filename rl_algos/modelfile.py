"""Where a learner reactor saves its model, one file per learner instance.

A program with one learner writes ``model.pt`` into its run directory; a program with several
learners (two agents) writes ``<instance path>.model.pt`` for each, the instance path being
the learner's name below the main reactor (``a_learner.model.pt``, ``agents[1].learner.model.pt``).
Learners are the instances of :data:`LEARNER_CLASSES`, counted in the program's ``graph.json``
(beside the generated module), so every learner decides alike without exchanging messages,
whatever the worker it runs on. Without a ``graph.json`` the instance path is always used.

The file is written canonically (:func:`canonical`): the same model gives the same bytes,
whether the run went uninterrupted or was resumed from a snapshot. ``torch.load`` reads it
as any ``torch.save`` file, and the files written before read as they did.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import torch

from .runlog import atomic_save
from .seeding import instance_path

#: Reactor classes (``lf_src/lib``) whose instances save a model.
LEARNER_CLASSES = frozenset({"PPOLearner", "DQNLearner", "SACLearner", "MAPPOLearner"})
#: The file name of the model of a program's only learner.
MODEL_FILE = "model.pt"


def learner_names(graph_json: str) -> list[str]:
    """Full names of the instances of :data:`LEARNER_CLASSES` in the program model at path
    ``graph_json`` (a ``graph.json``), in instance order; [] when the file does not exist."""
    try:
        with open(graph_json, encoding="utf-8") as f:
            reactors = json.load(f)["reactors"]
    except FileNotFoundError:
        return []
    return [r["name"] for r in reactors if r["class"] in LEARNER_CLASSES]


def model_file(full_name: str, learners: Sequence[str]) -> str:
    """The model file name of learner ``full_name`` (``Main.learner``) in a program whose
    learners are ``learners`` (full names): :data:`MODEL_FILE` when it is the only one, else
    ``<instance path>.model.pt``."""
    if list(learners) == [full_name]:
        return MODEL_FILE
    return f"{instance_path(full_name) or full_name}.{MODEL_FILE}"


def model_path(run_dir: str, full_name: str, graph_json: str) -> str:
    """``run_dir/<model_file>`` for learner ``full_name`` of the program of ``graph_json``."""
    return os.path.join(run_dir, model_file(full_name, learner_names(graph_json)))


def save_model(agent: Any, env_id: str, path: str) -> str:
    """Save ``agent.checkpoint()`` (a learner of :mod:`rl_algos.ppo`, :mod:`rl_algos.dqn` or
    :mod:`rl_algos.sac`) with ``env_id`` into ``path`` atomically and canonically
    (:func:`canonical`); returns ``path``. A module-level function, so that a
    :class:`rl_algos.salvage.Salvage` of ``functools.partial(save_model, ...)`` can be saved
    in a checkpoint."""
    return atomic_save(canonical(dict(agent.checkpoint(), env_id=env_id)), path)


def canonical(obj: Any, strings: dict[str, str] | None = None) -> Any:
    """``obj`` (what a model file holds: dicts, lists, tuples, strings, numbers, None and
    tensors) rebuilt so that ``torch.save`` writes the same bytes for equal contents: every
    container new (dicts as plain dicts, in their order), equal strings one object
    (``strings``: those met so far, by value), and every tensor a contiguous copy on the CPU
    with a storage of its own, detached. Pickle writes an object it meets a second time as a
    reference to the first (its memo), and ``torch.save`` numbers storages in the order it
    meets them: without this, equal models whose objects were shared differently (a resumed
    run unpickles its own copies of strings that were one interned object in the run it
    continues) give different bytes. Other values are returned as they are."""
    pool: dict[str, str] = {} if strings is None else strings
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone(memory_format=torch.contiguous_format)
    if isinstance(obj, str):
        # interned: torch.save's own strings ('cpu', the storages' location) are interned
        # literals, which an equal string of ours must be too, unpickled or not
        return pool.setdefault(obj, sys.intern(obj))
    if isinstance(obj, dict):
        return {canonical(k, pool): canonical(v, pool) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(canonical(v, pool) for v in obj)
    return obj
