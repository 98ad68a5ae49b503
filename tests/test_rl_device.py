"""rl_algos.device: the process-wide settings a learner makes before using torch."""

import platform
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

#: Where glibc's malloc puts the first 20 MiB block of a fresh process: True when in the heap
#: (the brk area, reused after a free), False when in a fresh mmap (returned to the kernel on
#: free, so its pages fault again next time). Run with "keep" to call keep_freed_memory first.
FIRST_BLOCK = textwrap.dedent(
    """
    import ctypes, sys
    from rl_algos.device import keep_freed_memory
    if sys.argv[1] == "keep":
        assert keep_freed_memory()
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block = libc.malloc(20 << 20)
    for line in open("/proc/self/maps"):
        if line.rstrip().endswith("[heap]"):
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            print(lo <= block < hi)
            break
    else:
        print(False)
    libc.free(block)
    """
)


def fresh_process(code: str, *args: str) -> str:
    """The standard output of ``code`` run by a new Python process with ``args``."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="glibc's malloc only",
)
def test_keep_freed_memory_serves_large_blocks_from_the_heap():
    def first_block_in_heap(mode: str) -> bool:
        return fresh_process(FIRST_BLOCK, mode).strip() == "True"

    assert not first_block_in_heap("default")  # glibc's default: a fresh mmap
    assert first_block_in_heap("keep")


CONFIGURE = textwrap.dedent(
    """
    import torch
    from rl_algos.device import configure_torch
    configure_torch(threads=1)
    print(torch.are_deterministic_algorithms_enabled(),
          torch.utils.deterministic.fill_uninitialized_memory,
          torch.get_num_threads(), torch.get_num_interop_threads())
    """
)


def test_configure_torch_is_deterministic_without_filling_new_tensors():
    assert fresh_process(CONFIGURE).split() == ["True", "False", "1", "1"]
