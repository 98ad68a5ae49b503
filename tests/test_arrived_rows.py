"""Values left in their writers' rows of shared memory on arrival (reactors.parallel.codec.Arrived):
read through ``Port.value``, gathered in one copy by ``Multiport.gather`` with exactly the
result of a gather of the values themselves (one worker), and copied out by ``settle`` before
a writer can overwrite them.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from bench.gather_rows import Crossings
from reactors.core.batched import BankPorts
from reactors.core.pending import Pending, current
from reactors.core.port import Multiport, Port
from reactors.parallel import shm
from reactors.parallel.codec import Arrived, settle


@pytest.fixture
def prefix():
    p = f"lftestrows{os.getpid()}x"
    yield p
    shm.unlink_prefix(p)


OBS = [np.arange(4, dtype=np.float32) * (i + 1) for i in range(6)]
STEPS = [(0.5 * i, i % 2 == 0, i == 3) for i in range(6)]
OTHER = [
    [np.arange(3, dtype=np.int16) - i for i in range(5)],
    [np.full((2, 3), i, np.float64) for i in range(5)],
    [np.array(i > 2) for i in range(5)],  # 0-d arrays
    [(i, 2.5 * i) for i in range(5)],  # int and float items: float64 rows
    [(i, -i) for i in range(5)],  # int items: int64 rows
    [(i % 2 == 1,) for i in range(5)],  # one bool item: bool rows
]


def _plain(values: list) -> np.ndarray:
    """The gather of ``values`` themselves, on channels that hold them (as on one worker)."""
    channels = []
    for i, v in enumerate(values):
        c = Port(f"p[{i}]")
        c._v, c._p = v, True
        channels.append(c)
    return Multiport(channels, "p").gather()


@pytest.mark.parametrize("values", [OBS, STEPS, *OTHER])
def test_a_gather_of_arrived_rows_equals_the_gather_of_the_values(prefix, values):
    x = Crossings(len(values), prefix)
    x.send(values)
    assert all(isinstance(p._v, Arrived) for p in x.dst)  # nothing decoded on arrival
    got = Multiport(x.dst, "hub.obs").gather()
    want = _plain(values)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
    assert got.flags.writeable
    got[...] = 0  # the caller's array: the channels keep their values
    for p, v in zip(x.dst, values):
        assert type(p.value) is type(v) and np.array_equal(p.value, v)
    assert all(not isinstance(p._v, Pending) for p in x.dst)


def test_reading_a_channel_decodes_it_once_and_keeps_the_value(prefix):
    x = Crossings(2, prefix)
    x.send(OBS[:2])
    first = x.dst[0].value
    assert np.array_equal(first, OBS[0]) and first.dtype == np.float32
    assert not first.flags.writeable  # read-only, as an array received from another worker
    assert x.dst[0].value is first and x.dst[0]._v is first
    assert isinstance(x.dst[1]._v, Arrived)
    assert np.array_equal(current(x.dst[1]), OBS[1])  # what records read: no read by the program
    settle(x.arrived)
    x.send(OBS[2:4])
    # the program reads channel 0 by itself: its values are decoded on arrival from now on
    assert type(x.dst[0]._v) is np.ndarray and np.array_equal(x.dst[0]._v, OBS[2])
    assert isinstance(x.dst[1]._v, Arrived)


def test_gathered_channels_stay_in_shared_memory_on_arrival(prefix):
    x = Crossings(3, prefix)
    for tag in range(3):
        x.send(STEPS[tag : tag + 3])
        assert all(isinstance(p._v, Arrived) for p in x.dst)
        assert (
            Multiport(x.dst, "hub.step").gather().tobytes()
            == _plain(STEPS[tag : tag + 3]).tobytes()
        )
        settle(x.arrived)


def test_settle_copies_what_was_not_read_out_of_the_block(prefix):
    x = Crossings(3, prefix)
    x.send(STEPS[:3])
    Multiport(x.dst[:2], "hub.step").gather()  # channels 0 and 1 move to the gather's copy
    assert len(x.arrived) == 3
    settle(x.arrived)
    assert x.arrived == []
    x.send([(9.0, True, True)] * 3)  # the writers overwrite their rows at the next tag
    settle(x.arrived)
    x.send([None, None, None])  # absent: the channels keep the last values, still undecoded
    assert all(isinstance(p._v, Arrived) for p in x.dst)
    assert [current(p) for p in x.dst] == [(9.0, True, True)] * 3
    x.send([(1.0, False, False), None, (2.0, True, False)])
    assert isinstance(x.dst[0]._v, Arrived) and not isinstance(x.dst[1]._v, Pending)
    settle(x.arrived)
    x.send([(5.0, True, True)] * 3)
    settle(x.arrived)
    x.send([None] * 3)
    assert [current(p) for p in x.dst] == [(5.0, True, True)] * 3


def test_a_value_kept_across_tags_is_the_one_received(prefix):
    x = Crossings(2, prefix)
    x.send(OBS[:2])
    kept = x.dst[1]._v
    settle(x.arrived)
    x.send([OBS[4], OBS[5]])  # overwrites both rows of the block
    assert isinstance(kept, Arrived) and np.array_equal(kept.load(False), OBS[1])


def test_channels_written_here_and_arrived_ones_gather_together(prefix):
    x = Crossings(3, prefix)
    x.send([OBS[0], None, OBS[2]])
    local = Port("hub.obs[1]")
    local._v, local._p = OBS[1], True  # a member on the hub's own worker
    mixed = Multiport([x.dst[0], local, x.dst[2]], "hub.obs")
    got = mixed.gather()
    assert got.tobytes() == _plain(OBS[:3]).tobytes()
    local._v = np.ones(4)  # float64 beside float32 rows: the general path names both
    x.send([OBS[0], None, OBS[2]])
    with pytest.raises(ValueError, match=r"channel 0 holds float32 \(4,\) but channel 1"):
        mixed.gather()


def test_rows_that_disagree_fail_as_values_do(prefix):
    x = Crossings(3, prefix)
    x.send([OBS[0], np.arange(5, dtype=np.float32), OBS[2]])
    with pytest.raises(ValueError, match=r"channel 0 holds float32 \(4,\) but channel 1"):
        Multiport(x.dst, "hub.obs").gather()
    x.send([STEPS[0], (1.0, 2.0, 3.0), STEPS[2]])
    assert Multiport(x.dst, "hub.step").gather().tobytes() == (
        _plain([STEPS[0], (1.0, 2.0, 3.0), STEPS[2]]).tobytes()
    )


def test_absent_rows_take_the_fill(prefix):
    x = Crossings(3, prefix)
    x.send([OBS[0], None, OBS[2]])
    got = Multiport(x.dst, "hub.obs").gather(fill=-1.0)
    assert got.dtype == np.float32
    assert got.tolist() == [OBS[0].tolist(), [-1.0] * 4, OBS[2].tolist()]
    # the present rows were taken in one copy, none decoded (nor switched to decoding)
    assert isinstance(x.dst[0]._v, Arrived) and isinstance(x.dst[2]._v, Arrived)
    x.send([None, STEPS[1], None])
    settle(x.arrived)
    x.send([STEPS[0], None, STEPS[2]])  # channel 1 holds an earlier tag's value: not a row
    assert isinstance(x.dst[0]._v, Arrived)
    got = Multiport(x.dst, "hub.step").gather(fill=0.0)
    assert got.tobytes() == _plain([STEPS[0], (0.0, 0.0, 0.0), STEPS[2]]).tobytes()
    with pytest.raises(ValueError, match=r"channel 1 is absent at this tag"):
        Multiport(x.dst, "hub.step").gather()


def test_a_bank_port_gathers_arrived_rows(prefix):
    x = Crossings(4, prefix)
    x.send(STEPS[:4])
    got = BankPorts(x.dst).gather()
    assert got.tobytes() == _plain(STEPS[:4]).tobytes()


def test_lists_dicts_and_numpy_scalars_are_decoded_on_arrival(prefix):
    x = Crossings(3, prefix)
    x.send([[1.0, 2.0], {"a": 1.0}, np.float32(2)])
    assert [type(p._v) for p in x.dst] == [list, dict, np.float32]
    assert x.arrived == []
