"""Tag, time units and constants (spec §1.2, §2.7)."""

import copy
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactors import api
from reactors.api import (
    BILLION,
    DAY,
    DAYS,
    FOREVER,
    HOUR,
    MINUTES,
    MSEC,
    NEVER,
    NSEC,
    SEC,
    USECS,
    WEEK,
    WEEKS,
    Tag,
    lf,
)
from reactors.core.units import parse_duration


def test_units():
    assert NSEC(5) == 5 and USECS(2) == 2_000 and MSEC(10) == 10_000_000
    assert SEC(1) == BILLION and MINUTES(1) == 60 * BILLION and HOUR(1) == 3600 * BILLION
    assert DAY(1) == DAYS(1) == 86_400 * BILLION and WEEK(2) == WEEKS(2) == 14 * DAY(1)


def test_constants():
    assert FOREVER == 0x7FFF_FFFF_FFFF_FFFF
    assert NEVER == -0xFFFF_FFFF_FFFF_FFFF
    assert api.instant_t is int and api.interval_t is int


def test_all_exports_exist():
    for name in api.__all__:
        assert hasattr(api, name), name


def test_tag_construction_and_readonly():
    t = Tag(time=5, microstep=2)
    assert (t.time, t.microstep) == (5, 2)
    assert Tag(5, 2) == t and Tag() == Tag(0, 0)
    with pytest.raises(AttributeError):
        t.time = 3
    with pytest.raises(AttributeError):
        t.microstep = 3
    with pytest.raises(TypeError):
        Tag(1.5, 0)


def test_tag_str_and_hash():
    assert str(Tag(time=10, microstep=1)) == "Tag(time=10, microstep=1)"
    with pytest.raises(TypeError):
        hash(Tag(1, 2))


def test_tag_compare_type_errors():
    for op in ("__lt__", "__le__", "__gt__", "__ge__"):
        with pytest.raises(TypeError):
            getattr(Tag(1, 0), op)(5)
    with pytest.raises(TypeError):
        _ = Tag(1, 0) == 5
    with pytest.raises(TypeError):
        _ = Tag(1, 0) < 5
    with pytest.raises(TypeError):
        lf.tag_compare(Tag(1, 0), (1, 0))


def test_tag_copy_and_pickle():
    t = Tag(7, 3)
    assert copy.deepcopy(t) == t and pickle.loads(pickle.dumps(t)) == t


@given(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**32),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**32),
)
def test_tag_order_is_lexicographic(t1, m1, t2, m2):
    a, b = Tag(t1, m1), Tag(t2, m2)
    ka, kb = (t1, m1), (t2, m2)
    assert (a < b) == (ka < kb) and (a <= b) == (ka <= kb)
    assert (a > b) == (ka > kb) and (a >= b) == (ka >= kb)
    assert (a == b) == (ka == kb) and (a != b) == (ka != kb)
    assert lf.tag_compare(a, b) == (ka > kb) - (ka < kb)


def test_parse_duration():
    assert parse_duration("10", "msec") == 10_000_000
    assert parse_duration("2", "wk") == 2 * WEEK(1)
    with pytest.raises(ValueError):
        parse_duration("1", "fortnight")
    with pytest.raises(ValueError):
        parse_duration("1.5", "sec")


def test_fed_maxwait_raises():
    with pytest.raises(RuntimeError):
        lf.get_fed_maxwait()
    with pytest.raises(RuntimeError):
        api.set_fed_maxwait(5)
