"""Batched multiports (reactors.core.batched): ``gather``, ``present_mask`` and ``scatter`` on
multiports and on a contained bank's ports, their errors, and the same results on any number of
workers, on both backends and on a Ray cluster.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import build, run_digest, run_program, same_on_any_workers

from reactors.core.batched import BankPorts
from reactors.core.port import Multiport, MutableMultiport, Port

FIXTURES = Path(__file__).parent / "batched_fixtures"
ROUND = re.compile(r"round (\d+): obs \w{8} reward \[.*\] present \[(.*)\] done \[.*\]")


def _multiport(values: list, present: list[bool] | None = None, name: str = "h.p") -> Multiport:
    """A multiport whose channel ``i`` holds ``values[i]``, present where ``present`` says."""
    channels = []
    for i, v in enumerate(values):
        c = Port(f"{name}[{i}]")
        c._v, c._p = v, True if present is None else present[i]
        channels.append(c)
    return Multiport(channels, name)


def test_gather_stacks_the_channels_into_a_new_array():
    rows = [np.arange(3, dtype=np.float32) + i for i in range(4)]
    p = _multiport(rows)
    out = p.gather()
    assert out.dtype == np.float32 and out.shape == (4, 3)
    assert np.array_equal(out, np.stack(rows))
    assert out.flags.writeable and not any(np.shares_memory(out, r) for r in rows)
    assert p.gather() is not out  # a new array at every call: the caller may keep it
    for values, dtype in (([1.5, 2.5], np.float64), ([1, 2], np.int64), ([True, False], np.bool_)):
        got = _multiport(values).gather()
        assert got.dtype == dtype and got.tolist() == values
    got = _multiport([(1.0, True, False), (2.0, False, True)]).gather()
    assert got.tolist() == [[1.0, 1.0, 0.0], [2.0, 0.0, 1.0]]  # np.asarray of each tuple
    assert _multiport([np.float32(1), np.float32(2)]).gather().dtype == np.float32
    assert Multiport([], "h.none").gather().shape == (0,)


def test_absent_channels_are_an_error_unless_filled():
    p = _multiport([np.ones(2), np.full(2, 5.0), np.ones(2)], [True, False, True])
    with pytest.raises(ValueError, match=r"^h\.p\.gather\(\): channel 1 is absent at this tag"):
        p.gather()
    assert p.gather(fill=-1).tolist() == [[1, 1], [-1, -1], [1, 1]]  # not the stale 5.0
    assert p.present_mask().tolist() == [True, False, True]
    assert p.present_mask().dtype == np.bool_
    none = _multiport([1.0, 2.0], [False, False])
    assert none.gather(fill=0.5).tolist() == [0.5, 0.5]
    assert none.gather(fill=np.zeros(2, np.float32)).dtype == np.float32


@pytest.mark.parametrize(
    "values, message",
    [
        ([1.0, 2], r"channel 0 holds float64 \(\) but channel 1 holds int64 \(\)"),
        ([np.zeros(3), np.zeros(3), np.zeros(2)], r"channel 0 .* \(3,\) but channel 2 .* \(2,\)"),
        (
            [np.zeros(3), np.zeros(3, np.float32)],
            r"channel 0 holds float64 \(3,\) but channel 1 holds float32",
        ),
        ([np.zeros(2), [0.0, 0.0, 0.0]], r"channel 0 .* \(2,\) but channel 1 .* \(3,\)"),
        ([{"a": 1}, {"a": 2}], r"channel 0's value is not an array of numbers"),
        ([2**70, 1], r"channel 0's value is not an array of numbers"),
    ],
)
def test_channels_that_disagree_are_named(values, message):
    with pytest.raises(ValueError, match=r"^h\.p\.gather\(\): " + message):
        _multiport(values).gather()


def test_scatter_sets_each_channel_to_its_row():
    p = _multiport([None] * 3, [False] * 3)
    acts = np.arange(6.0).reshape(3, 2)
    p.scatter(acts)
    assert all(c.is_present for c in p)
    assert [c.value.tolist() for c in p] == acts.tolist()
    assert all(np.shares_memory(c.value, acts) for c in p)  # stored as set() stores: no copy
    q = _multiport([None] * 2, [False] * 2)
    q.scatter(["a", (1, 2)])
    assert [c.value for c in q] == ["a", (1, 2)]
    with pytest.raises(ValueError, match=r"^h\.p\.scatter\(\): 4 rows for 3 channels"):
        p.scatter(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"^h\.p\.scatter\(\): a value of type float64 has no"):
        p.scatter(np.float64(1.0))
    with pytest.raises(ValueError, match=r"type ndarray has no rows; expected 3 rows"):
        p.scatter(np.array(1.0))


def test_a_mutable_multiport_gathers_its_private_values():
    src = _multiport([np.zeros(2), np.ones(2)])
    view = MutableMultiport([], "h.m")
    from reactors.core.port import mutable_view

    view = mutable_view(src)
    assert isinstance(view, MutableMultiport)
    view[1].value[:] = 7.0  # the private copy, not the upstream value
    assert view.gather().tolist() == [[0, 0], [7, 7]]
    assert src.gather().tolist() == [[0, 0], [1, 1]]


def test_a_bank_of_multiports_gathers_member_by_channel():
    members = BankPorts(
        _multiport([float(10 * m + c) for c in range(2)], name=f"top.b[{m}].out") for m in range(3)
    )
    got = members.gather()
    assert got.shape == (3, 2) and got.tolist() == [[0, 1], [10, 11], [20, 21]]
    members.scatter(np.zeros((3, 2, 4)))
    assert all(c.value.shape == (4,) for m in members for c in m)
    with pytest.raises(ValueError, match=r"^top\.b\.out\.scatter\(\): 2 rows for 3 channels"):
        members.scatter([1, 2])
    uneven = BankPorts([_multiport([1.0], name="top.c[0].out"), _multiport([1.0, 2.0])])
    with pytest.raises(ValueError, match=r"^top\.c\.out\.gather\(\): the members' ports differ"):
        uneven.gather()


def _rounds(stdout: str) -> list[list[int]]:
    """The presence masks of the reward channels, one per round line of BatchedHub."""
    found = [(int(m[1]), m[2]) for m in ROUND.finditer(stdout)]
    assert [r for r, _ in found] == list(range(len(found)))
    return [[int(x) for x in mask.split(", ")] for _, mask in found]


def test_gather_and_scatter_give_the_same_results_on_any_workers(tmp_path):
    launcher = build(FIXTURES / "BatchedHub.lf", tmp_path)
    ref, ref_digest = run_digest(launcher, "one")
    assert ref.returncode == 0, ref.stdout[-2000:] + ref.stderr[-2000:]
    masks = _rounds(ref.stdout)
    # member i's reward is absent in round k >= 1 (its step k) when (k + i) % 3 == 0
    assert masks == [[1] * 5] + [[int((k + i) % 3 != 0) for i in range(5)] for k in range(1, 13)]
    assert ref.stdout.count("container: done [") == 13
    variants = [("2", "processes"), ("3", "processes"), ("2", "threads"), ("3", "threads")]
    same_on_any_workers(launcher, ref, ref_digest, None, variants=variants)


def test_a_gather_of_channels_that_disagree_fails_the_run_with_its_place(tmp_path):
    launcher = build(FIXTURES / "BadGather.lf", tmp_path)
    for args in ((), ("-w", "2")):
        r = run_program(launcher, *args)
        assert r.returncode != 0
        assert "reaction 1 of BadGather.hub failed at " in r.stderr
        assert "BadGather.lf:24" in r.stderr
        assert (
            "ValueError: BadGather.hub.obs.gather(): channel 0 holds float64 (3,) "
            "but channel 1 holds float64 (2,)" in r.stderr
        )


@pytest.mark.xdist_group("ray-cluster")  # never beside test_cluster.py's cluster
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_gather_and_scatter_on_a_ray_cluster_equal_one_worker(tmp_path):
    from ray.cluster_utils import Cluster

    launcher = build(FIXTURES / "BatchedHub.lf", tmp_path)
    ref, ref_digest = run_digest(launcher, "one")
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        c.add_node(num_cpus=1)
        c.wait_for_nodes()
        r, digest = run_digest(launcher, "two", "-w", "2", "--cluster", f"ray={c.address}")
    finally:
        c.shutdown()
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == ref.stdout and digest == ref_digest
