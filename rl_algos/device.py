"""Device choice and deterministic torch settings (DESIGN.md, "Determinism" and "RL on reactors").

A learner places its model on ``cuda`` when available, else on the CPU, and moves a batch
there in ONE host-to-device copy (:func:`batch_to_device`). Every worker process calls
:func:`configure_torch` before using torch: deterministic algorithms and a fixed thread
count, so results do not depend on the machine's core count.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator

import numpy as np
import torch

_configured = False

#: glibc's ``mallopt`` parameters (malloc.h) and the values :func:`keep_freed_memory` sets
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_MALLOC_SETTINGS = (
    (_M_MMAP_THRESHOLD, 32 << 20),  # glibc's largest: blocks up to 32 MiB from the heap
    (_M_TRIM_THRESHOLD, 1 << 30),  # free memory at the heap's top kept up to 1 GiB
    (_M_TOP_PAD, 64 << 20),  # the heap grows by 64 MiB more than asked at a time
)


def configure_torch(threads: int = 1) -> None:
    """Make torch deterministic in this process (idempotent).

    Sets torch's deterministic-algorithms switch (what ``torch.use_deterministic_algorithms``
    sets for eager code, without its import of ``torch._inductor``: 2 to 4 s per process here,
    for a flag only ``torch.compile`` reads), ``torch.set_num_threads(threads)`` and one
    inter-op thread, and ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (needed by cuBLAS for
    deterministic GEMMs; only effective before CUDA is first used).

    The switch's companion, filling every new tensor's memory with NaN before use
    (``torch.utils.deterministic.fill_uninitialized_memory``, a guard against kernels that
    read memory they did not write), is turned off: no result depends on it, and it wrote
    each tensor twice (an Atari PPO update: ~1,500 fills, 5-8% of its time here).
    """
    global _configured
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    switch = getattr(torch._C, "_set_deterministic_algorithms", None)
    if switch is not None:
        switch(True)
    else:  # a torch without it: the public call
        torch.use_deterministic_algorithms(True)
    fill = getattr(torch._C, "_set_deterministic_fill_uninitialized_memory", None)
    if fill is not None:
        fill(False)
    torch.set_num_threads(int(threads))
    if not _configured:
        keep_freed_memory()
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # inter-op pool already started: its size can no longer change
            pass
        _configured = True


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep the memory this process frees for its next allocations
    (``mallopt``: blocks up to 32 MiB from the heap rather than fresh ``mmap``s, and the heap's
    free top kept up to 1 GiB). By default each large tensor (an Atari minibatch of 256 float
    frames is 29 MB) gets new pages from the kernel and returns them when freed, so every
    minibatch pays a page fault per 4 KiB it touches: on this machine a Pong update took
    130-210k page faults and 1.14-1.25 s, against ~0 and 1.02-1.05 s with these settings.
    Returns whether the settings were made (False off glibc, where nothing changes); never
    raises. Only speed depends on it, never a result."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return all(mallopt(param, value) == 1 for param, value in _MALLOC_SETTINGS)


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` (>= 1) intra-op threads of torch's CPU kernels, then restore
    the count it had. The count is the process's: what other threads of the process run on
    the CPU meanwhile runs with it too.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"torch threads must be at least 1, not {n}")
    before = torch.get_num_threads()
    if n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def choose_device(name: str = "auto") -> torch.device:
    """``torch.device("cuda")`` when ``name`` is ``"auto"`` and CUDA is available, else the
    CPU; ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` are taken as given.

    Raises:
        ValueError: any other name, or a CUDA device asked for where torch sees none (the
            message says what was asked and what there is).
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kind, _, index = name.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()):
        raise ValueError(f"device {name!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(index or 0) >= count:
            raise ValueError(
                f"device {name!r}: this machine's torch sees {count} CUDA device(s); "
                "use 'auto' or 'cpu'"
            )
    return torch.device(name)


_TORCH_DTYPES = {
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
    np.dtype(np.int64): torch.int64,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.uint8): torch.uint8,
    np.dtype(np.bool_): torch.bool,
}


def batch_to_device(arrays: dict, device: torch.device) -> dict:
    """Move a batch of numpy arrays to ``device`` in a single host-to-device copy.

    ``arrays`` maps names to numpy arrays of any shape and of dtype float32, float64, int64,
    int32, uint8 or bool (TypeError otherwise). Their bytes are packed into one host buffer
    (each block 8-byte aligned), copied once, and viewed on the device: each value comes back
    as a tensor with the array's shape and dtype, bit-identical (uint8 Atari frames stay
    uint8, so the copy is as small as the data).
    """
    blocks, layout, offset = [], [], 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype not in _TORCH_DTYPES:
            raise TypeError(f"batch_to_device: unsupported dtype {a.dtype} for '{name}'")
        pad = -offset % 8
        if pad:
            blocks.append(np.zeros(pad, np.uint8))
            offset += pad
        blocks.append(a.reshape(-1).view(np.uint8))
        layout.append((name, offset, a.nbytes, a.dtype, a.shape))
        offset += a.nbytes
    host = torch.from_numpy(np.concatenate(blocks) if blocks else np.zeros(0, np.uint8))
    dev = host.to(device)
    return {
        name: dev[off : off + n].view(_TORCH_DTYPES[dt]).reshape(shape)
        for name, off, n, dt, shape in layout
    }
