"""Per-reactor random number generators (DESIGN.md, "Determinism").

Every reactor instance draws its randomness from its own generators, seeded from the program
seed and the instance's path below the main reactor (``envs[2]`` for ``Main.envs[2]``), so a
renamed copy of a program draws the same streams. The path is hashed with SHA-256, never with
Python's ``hash()`` (salted per process), so the same program and seed give the same streams
whatever the number of workers, the placement of instances or ``PYTHONHASHSEED``. Torch draws
come from a ``torch.Generator`` of the reactor's own (:func:`torch_generator`), never from
torch's process-wide generator, which reactors on worker threads would share.

Source: numpy's ``SeedSequence`` (NEP 19) mixes the entropy words into well-spread states.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is imported by the reactors that use it (a second of start-up)
    import torch

#: 32-bit words taken from the SHA-256 digest of the instance name (all 8 of them).
_NAME_WORDS = 8


def name_words(name: str) -> list[int]:
    """The SHA-256 digest of ``name`` (UTF-8) as eight unsigned 32-bit integers (stable
    across processes, platforms and Python versions)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return [int.from_bytes(digest[4 * i : 4 * i + 4], "little") for i in range(_NAME_WORDS)]


def instance_path(full_name: str) -> str:
    """The path of an instance below the main reactor: ``Main.envs[1]`` -> ``envs[1]``,
    ``Main.agent.learner`` -> ``agent.learner``; the main reactor itself (``Main``) -> ``""``."""
    return full_name.partition(".")[2]


def seed_sequence(seed: int, name: str) -> np.random.SeedSequence:
    """The root ``SeedSequence`` of reactor instance ``name`` in a program run with ``seed``.

    ``seed`` is a non-negative int (ValueError otherwise); ``name`` the instance's full name
    (``self.lf_reactor_full_name()``), of which only :func:`instance_path` is hashed.
    """
    if int(seed) < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    return np.random.SeedSequence([int(seed), *name_words(instance_path(name))])


def reactor_rng(seed: int, name: str) -> np.random.Generator:
    """A PCG64 generator owned by reactor instance ``name`` (its full name; see
    :func:`seed_sequence`)."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, name)))


def derive_int(ss: np.random.SeedSequence, purpose: str) -> int:
    """A 63-bit int seed for another library (torch, an environment), derived from ``ss`` and
    a ``purpose`` label, so that the streams of different purposes are independent and do not
    consume the reactor's main generator."""
    child = np.random.SeedSequence([*ss.generate_state(4), *name_words(purpose)])
    return int(child.generate_state(2, np.uint64)[0] >> np.uint64(1))


def torch_generator(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed`` (an int, e.g. from :func:`derive_int`),
    for the torch draws of one reactor (network initialisation)."""
    import torch

    return torch.Generator().manual_seed(int(seed))
