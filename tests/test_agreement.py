"""The next-tag agreement of free-running runs as a combining tree (reactors.parallel.agreement):
its shape, the same results on any worker count (skipping workers among its inner nodes
included), and the cells each worker touches per tag whatever the worker count."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, build, run_digest, run_program

from reactors.parallel.agreement import ARITY, TREE_FROM, layout

FIXTURES = ROOT / "tests" / "parallel_fixtures"
SPARSE = FIXTURES / "Sparse.lf"
TINY = ROOT / "lf_src" / "bench" / "TinyBank.lf"


def _parents(children: list[list[int]]) -> dict[int, int]:
    return {c: p for p, cs in enumerate(children) for c in cs}


@pytest.mark.parametrize("workers", [3, 4, 5, 16, 21, 64])
@pytest.mark.parametrize("skipping", [0, 1, 3, 15])
def test_the_tree_reaches_every_worker_once_with_a_bounded_fan_out(workers, skipping):
    skippers = list(range(workers - 1, workers - 1 - skipping, -1))
    skippers = [w for w in skippers if w > 0]
    children = layout(workers, skippers)
    parents = _parents(children)
    assert sorted(parents) == list(range(1, workers))  # every worker but the root, once
    assert max(len(c) for c in children) <= ARITY
    depth = {0: 0}
    order = [0]
    for w in order:  # breadth-first
        for c in children[w]:
            depth[c] = depth[w] + 1
            order.append(c)
    assert len(order) == workers
    # a complete ARITY-ary tree: 2 hops at 16 workers, 3 at 64
    hops, fit = 0, 1
    while fit < workers:
        hops, fit = hops + 1, fit + ARITY ** (hops + 1)
    assert max(depth.values()) == hops
    # a worker that may skip has children only where the others do not give room
    never = workers - len(skippers)
    inner = [w for w in range(workers) if children[w]]
    assert len([w for w in inner if w in skippers]) <= max(0, len(inner) - never)


def test_with_few_workers_the_skipping_ones_are_leaves():
    children = layout(4, [1, 2, 3])
    assert children[0] == [1, 2, 3] and not any(children[1:])
    children = layout(8, [5, 6, 7])  # 0..4 never skip: 5, 6, 7 hang under them
    assert all(not children[w] for w in (5, 6, 7))


@pytest.fixture(scope="module")
def sparse(tmp_path_factory):
    return build(SPARSE, tmp_path_factory.mktemp("sparse"))


def test_sparse_sources_agree_alike_on_any_workers(sparse):
    """Sixteen sources with their own periods and microstep bursts: the same lines and port
    values on 1 worker and on 3, 6 and 16 (processes) and 16 threads; on 16 workers the sources
    that are inner nodes of the tree (workers 1 to 3) skip no tag, the others skip theirs."""
    ref, digest = run_digest(sparse, "w1", "-w", "1")
    assert ref.returncode == 0, ref.stderr
    assert ref.stdout.splitlines()[-1].startswith("sink: 44 tags"), ref.stdout
    over = "--oversubscribe"  # a process per worker, also on fewer cores
    for args in (
        ("-w", "3", over),
        ("-w", "6", over),
        ("-w", "16", over),
        ("-w", "16", "--backend", "threads"),
    ):
        r, d = run_digest(sparse, "w" + "".join(args), *args, "--verbose", timeout=180)
        assert r.returncode == 0 and r.stdout == ref.stdout, (args, r.stderr[-2000:])
        assert d == digest, f"{args}: port values differ"
        if args == ("-w", "16", over):
            skipped = {int(w) for w in re.findall(r"worker (\d+) skipped", r.stderr)}
            assert skipped == set(range(4, 16)), r.stderr[-2000:]


def _counts(launcher, workers: int, checksum: str) -> dict[int, int]:
    module = next((launcher.parent.parent / "src-gen").glob("*/TinyBank.py"))
    env = dict(os.environ, REACTORS_COMPILED="0")
    r = subprocess.run(
        [sys.executable, str(FIXTURES / "count_cells.py"), str(module), "-w", str(workers)]
        + ["--backend", "threads", "--rounds", "30"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert checksum in r.stdout, (checksum, r.stdout)
    line = re.search(r"COUNTS (.*)", r.stderr)
    assert line, r.stderr[-2000:]
    return {int(k): v for k, v in json.loads(line.group(1)).items()}


def test_the_cells_a_worker_touches_per_tag_do_not_grow_with_the_worker_count(tmp_path):
    """A hub and 16 cells on W workers: each worker touches the agreement cells of at most
    ARITY children and the root's decision (9 cells each: a DONE and two reports of four),
    whatever W; with two workers, which agree by the flat exchange, each reads the other's 9.
    (The flat exchange on 16 workers would touch 15 x 9 = 135.)"""
    launcher = build(TINY, tmp_path, "-D", "n=16")
    one = run_program(launcher, "-w", "1", "--rounds", "30")
    checksum = re.search(r'"checksum": \d+', one.stdout).group(0)
    assert _counts(launcher, 2, checksum) == {0: 9, 1: 9}
    bound = 9 * ARITY + 9
    for workers in (TREE_FROM, 8, 16):
        counts = _counts(launcher, workers, checksum)
        assert sorted(counts) == list(range(workers)), counts
        assert max(counts.values()) <= bound, (workers, counts)
        leaves = [w for w, n in counts.items() if n == 9]  # only the root's decision
        assert len(leaves) >= workers - 1 - (workers - 2) // ARITY, (workers, counts)
