"""The tag engine's rules in isolation (spec §3.1, §3.9, §3.10, §3.13): start tag, next-tag
rule, where a physical event lands and advancing to a tag."""

from hypothesis import given
from hypothesis import strategies as st

from reactors.core.engine import (
    TagEngine,
    Timing,
    decide,
    physical_tag,
    start_tag,
)
from reactors.core.event_queue import EventQueue
from reactors.core.log import Log
from reactors.core.tag import FOREVER, NEVER_INT64

NOW = (100, 2)


def test_start_tag_rounds_up_to_the_multiple():
    assert start_tag(1_234, 0) == 1_234
    assert start_tag(1_234, 1_000) == 2_000
    assert start_tag(2_000, 1_000) == 2_000


def test_pending_event_before_the_stop_tag_is_next():
    assert decide((150, 0), NOW, (FOREVER, 0), False, True, NEVER_INT64) == (
        (150, 0),
        (FOREVER, 0),
        None,
    )


def test_never_past_the_stop_tag():
    assert decide((500, 0), NOW, (300, 0), False, True, 0)[0] == (300, 0)
    assert decide((300, 1), NOW, (300, 0), False, True, 0)[0] == (300, 0)
    assert decide((300, 0), NOW, (300, 0), False, True, 0)[0] == (300, 0)


def test_starvation_stops_at_the_next_microstep():
    step = decide(None, NOW, (FOREVER, 0), False, True, 0)
    assert step == ((100, 3), (100, 3), None)


def test_keepalive_without_events_sleeps_until_woken():
    assert decide(None, NOW, (FOREVER, 0), True, True, 0) == (None, (FOREVER, 0), None)


def test_keepalive_without_events_waits_for_the_stop_tag_even_when_fast():
    assert decide(None, NOW, (300, 0), True, True, 0) == ((300, 0), (300, 0), 300)


def test_waits_for_physical_time_unless_fast():
    assert decide((150, 0), NOW, (FOREVER, 0), False, False, 120)[2] == 150
    assert decide((150, 0), NOW, (FOREVER, 0), False, False, 150)[2] is None
    assert decide((150, 0), NOW, (FOREVER, 0), False, True, 120)[2] is None


@given(
    top=st.none() | st.tuples(st.integers(0, 1_000), st.integers(0, 3)),
    stop=st.tuples(st.integers(100, 1_000), st.integers(0, 3)).filter(lambda s: s > NOW),
    keepalive=st.booleans(),
)
def test_next_tag_is_after_now_and_never_past_the_stop_tag(top, stop, keepalive):
    if top is not None and top <= NOW:  # pending events are always after the current tag
        top = (NOW[0], NOW[1] + 1)
    tag, new_stop, _until = decide(top, NOW, stop, keepalive, True, 0)
    assert new_stop <= stop
    if tag is not None:
        assert NOW < tag <= new_stop


def test_physical_event_lands_at_its_time_or_the_first_open_tag():
    assert physical_tag(500, 20, 0, (100, 3)) == (520, 0)
    assert physical_tag(80, 20, 0, (100, 3)) == (100, 3)
    assert physical_tag(50, 0, 90, (10, 0)) == (90, 0)  # never before the start time
    assert physical_tag(FOREVER - 5, 10, 0, (100, 3)) is None


class _Target:
    mode = None

    def __init__(self):
        self.fired = []

    def _fire(self, e):
        self.fired.append(e[4])


def test_advance_clears_presence_and_fires_the_tags_events():
    engine = TagEngine(Timing(fast=True), Log("info"))
    target = _Target()
    q = engine.queue
    q.push(10, 0, target, "a")
    q.push(10, 1, target, "b")
    dead = q.push(10, 1, target, "dead")
    dead[3] = None
    q.push(10, 1, target, "c")

    class Present:
        _p = True

    obj = Present()
    present = [obj]
    engine.advance(10, 0, present)
    engine.advance(10, 1, present)
    assert (engine.time, engine.micro) == (10, 1)
    assert not obj._p and present == []
    assert target.fired == ["a", "b", "c"]
    assert q.peek() is None


def test_next_tag_decides_again_when_woken():
    engine = TagEngine(Timing(), Log("info"), now=lambda: 0)
    pending = [(50, 0)]
    sleeps = []

    def sleep(t):
        sleeps.append(t)
        if len(sleeps) == 1:
            pending[0] = (30, 0)  # a physical event arrived meanwhile
            return False
        return True

    assert engine.next_tag(lambda: pending[0], sleep) == (30, 0)
    assert sleeps == [50, 30]


def test_event_queue_fire_only_fires_the_given_tag():
    q = EventQueue()
    target = _Target()
    q.push(5, 0, target, "later")
    q.fire(4, 0)
    assert target.fired == []
    q.fire(5, 0)
    assert target.fired == ["later"]
