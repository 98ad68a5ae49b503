"""Per-reactor random number generators (DESIGN.md, "Determinism").

Every reactor instance draws its randomness from its own generator, seeded from the program
seed and the instance's full name (``Main.envs[2]``). The name is hashed with SHA-256, never
with Python's ``hash()`` (salted per process), so the same program and seed give the same
streams whatever the number of workers, the placement of instances or ``PYTHONHASHSEED``.

Source: numpy's ``SeedSequence`` (NEP 19) mixes the entropy words into well-spread states.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

#: 32-bit words taken from the SHA-256 digest of the instance name (all 8 of them).
_NAME_WORDS = 8


def name_words(name: str) -> list[int]:
    """The SHA-256 digest of ``name`` (UTF-8) as eight unsigned 32-bit integers (stable
    across processes, platforms and Python versions)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return [int.from_bytes(digest[4 * i : 4 * i + 4], "little") for i in range(_NAME_WORDS)]


def seed_sequence(seed: int, name: str) -> np.random.SeedSequence:
    """The root ``SeedSequence`` of reactor instance ``name`` in a program run with ``seed``.

    ``seed`` is a non-negative int (ValueError otherwise); ``name`` the instance's full name.
    """
    if int(seed) < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    return np.random.SeedSequence([int(seed), *name_words(name)])


def reactor_rng(seed: int, name: str) -> np.random.Generator:
    """A PCG64 generator owned by reactor instance ``name`` (see :func:`seed_sequence`)."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, name)))


def derive_int(ss: np.random.SeedSequence, purpose: str) -> int:
    """A 63-bit int seed for another library (torch, an environment), derived from ``ss`` and
    a ``purpose`` label, so that the streams of different purposes are independent and do not
    consume the reactor's main generator."""
    child = np.random.SeedSequence([*ss.generate_state(4), *name_words(purpose)])
    return int(child.generate_state(2, np.uint64)[0] >> np.uint64(1))


@contextmanager
def torch_seeded(seed: int) -> Iterator[None]:
    """Run the ``with`` body under torch's global CPU generator seeded with ``seed``, then
    restore the previous generator state, so that two reactors building networks in one
    process do not consume each other's randomness. CUDA generators are left alone (network
    construction happens on the CPU)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
