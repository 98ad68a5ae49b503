"""Logical and physical actions, policies, physical time and keepalive (spec §2.4, §3.3,
§3.11, §3.13)."""

import threading
import time

import pytest
from runtime_fixtures.graphkit import Kit, act

from reactors.api import MSEC, ReactorBase, lf, request_stop
from reactors.model.references import ActionArg

LOG = []


@pytest.fixture(autouse=True)
def _clear():
    LOG.clear()


def elapsed():
    t = lf.tag()
    return (t.time - lf.time.start(), t.microstep)


def one_reactor(
    cls,
    actions,
    timeout=None,
    fast=True,
    keepalive=False,
    shutdown=False,
    startup_effects=("a",),
    timers=(),
):
    """Main with reaction 0 on startup (effects: the actions) and reaction 1 on action a."""
    k = Kit(timeout=timeout, fast=fast, keepalive=keepalive)
    m = k.add("Main", cls, actions=actions, timers=timers)
    k.reaction(m, ["startup"], effects=[("action", a) for a in startup_effects])
    k.reaction(m, [("action", "a")], effects=[("action", "a")])
    if shutdown:
        k.reaction(m, ["shutdown"])
    return k


class Recorder(ReactorBase):
    """Reaction 1 records (elapsed tag, value, presence) of action a."""

    def reaction_function_1(self, a):
        LOG.append((elapsed(), a.value, a.is_present))


def test_min_delay_and_payload():
    class R(Recorder):
        def reaction_function_0(self, a):
            a.schedule(MSEC(5), "x")

    assert one_reactor(R, [act("a", min_delay=MSEC(100))]).run() == 0
    assert LOG == [((MSEC(105), 0), "x", True)]


def test_zero_delay_piles_up_in_microsteps():
    class R(Recorder):
        def reaction_function_0(self, a):
            a.schedule(0, 1)
            a.schedule(0, 2)
            a.schedule(MSEC(1), 3)
            a.schedule(MSEC(1), 4)

    assert one_reactor(R, [act("a")]).run() == 0
    assert LOG == [
        ((0, 1), 1, True),
        ((0, 2), 2, True),
        ((MSEC(1), 0), 3, True),
        ((MSEC(1), 1), 4, True),
    ]


def test_action_value_persists_and_presence_clears():
    class R(ReactorBase):
        def reaction_function_0(self, a):
            a.schedule(0, "v")

        def reaction_function_1(self, a):
            LOG.append((elapsed(), a.value, a.is_present))

    k = Kit(timeout=MSEC(2))
    m = k.add("Main", R, actions=[act("a")], timers=[("t", MSEC(1), 0)])
    k.reaction(m, ["startup"], effects=[("action", "a")])
    k.reaction(m, [("action", "a"), ("timer", "t")], args=[ActionArg("a", "a")])
    assert k.run() == 0
    assert LOG == [((0, 1), "v", True), ((MSEC(1), 0), "v", False)]


def spaced(policy):
    class R(Recorder):
        def reaction_function_0(self, a):
            a.schedule(0, "first")
            a.schedule(MSEC(100), "second")
            a.schedule(MSEC(500), "third")

    return one_reactor(R, [act("a", min_spacing=MSEC(300), policy=policy)])


def test_min_spacing_defer():
    assert spaced("defer").run() == 0
    assert LOG == [
        ((0, 1), "first", True),
        ((MSEC(300), 0), "second", True),
        ((MSEC(600), 0), "third", True),
    ]


def test_min_spacing_drop():
    assert spaced("drop").run() == 0
    assert LOG == [((0, 1), "first", True), ((MSEC(500), 0), "third", True)]


def test_min_spacing_replace():
    assert spaced("replace").run() == 0
    # "second" replaces the queued "first"; "third" is on time
    assert LOG == [((0, 1), "second", True), ((MSEC(500), 0), "third", True)]


def test_min_spacing_update():
    assert spaced("update").run() == 0
    # "second" is early: it removes the queued "first" and keeps its own tag
    assert LOG == [((MSEC(100), 0), "second", True), ((MSEC(500), 0), "third", True)]


def test_replace_after_previous_was_handled_defers():
    class R(ReactorBase):
        def _lf_init_state(self):
            self.n = 0

        def reaction_function_0(self, a):
            a.schedule(0, 0)

        def reaction_function_1(self, a):
            LOG.append((elapsed(), a.value))
            self.n += 1
            if self.n < 3:
                a.schedule(MSEC(10), self.n)

    assert one_reactor(R, [act("a", min_spacing=MSEC(100), policy="replace")]).run() == 0
    assert LOG == [((0, 1), 0), ((MSEC(100), 0), 1), ((MSEC(200), 0), 2)]


def test_schedule_delay_types(capsys):
    class R(Recorder):
        def reaction_function_0(self, a):
            a.schedule(-5, "neg")

    assert one_reactor(R, [act("a")]).run() == 0
    assert LOG == [((0, 1), "neg", True)]
    assert "negative delay" in capsys.readouterr().err

    class F(Recorder):
        def reaction_function_0(self, a):
            a.schedule(1.5)

    assert one_reactor(F, [act("a")]).run() == 1
    assert "TypeError" in capsys.readouterr().err


def test_events_after_timeout_are_discarded(capsys):
    class R(Recorder):
        def reaction_function_0(self, a):
            a.schedule(MSEC(5), "in")
            a.schedule(MSEC(50), "out")

    assert one_reactor(R, [act("a")], timeout=MSEC(10)).run() == 0
    assert LOG == [((MSEC(5), 0), "in", True)]


def test_events_left_at_stop_are_discarded_without_a_word(capsys):
    class R(ReactorBase):
        def reaction_function_0(self, a):
            a.schedule(MSEC(50), "late")
            request_stop()

        def reaction_function_1(self, a):
            LOG.append("never")

    assert one_reactor(R, [act("a")]).run() == 0
    assert LOG == []
    assert "future action event" not in capsys.readouterr().err  # as on several workers


class DelayReactor(ReactorBase):
    """What lfc emits for ``after``: act -> out forwards; inp -> act schedules."""

    def reaction_function_0(self, act, out):
        out.set(act.value)

    def reaction_function_1(self, inp, act):
        act.schedule(0, inp.value)


@pytest.mark.parametrize("delay,expect", [(MSEC(10), (MSEC(10), 0)), (0, (0, 1))])
def test_after_delay_lowering(delay, expect):
    class Src(ReactorBase):
        def reaction_function_0(self, out):
            out.set("msg")

    class Dst(ReactorBase):
        def reaction_function_0(self, inp):
            LOG.append((elapsed(), inp.value))

    k = Kit()
    main = k.add("Main", ReactorBase)
    s = k.add("s", Src, parent=main, ports=["out"])
    d = k.add("d", Dst, parent=main, ports=["inp"])
    dl = k.add(
        "delay",
        DelayReactor,
        parent=main,
        ports=["inp", "out"],
        actions=[act("act", min_delay=delay)],
    )
    k.reaction(s, ["startup"], effects=[("port", s, "out")])
    k.reaction(d, [("port", d, "inp")])
    k.reaction(dl, [("action", "act")], effects=[("port", dl, "out")])
    k.reaction(dl, [("port", dl, "inp")], effects=[("action", "act")])
    k.connect(s, "out", dl, "inp")
    k.connect(dl, "out", d, "inp")
    assert k.run() == 0
    assert LOG == [(expect, "msg")]


def test_waits_for_physical_time():
    class R(ReactorBase):
        def reaction_function_0(self):
            LOG.append(lf.time.physical() - lf.time.logical())

    k = Kit(timeout=MSEC(60), fast=False)
    m = k.add("Main", R, timers=[("t", 0, MSEC(20))])
    k.reaction(m, [("timer", "t")])
    t0 = time.monotonic()
    assert k.run() == 0
    assert time.monotonic() - t0 >= 0.055
    assert len(LOG) == 4 and all(lag >= 0 for lag in LOG)


def test_physical_action_from_threads_wakes_the_scheduler():
    class R(ReactorBase):
        def reaction_function_0(self, a):
            def work():
                time.sleep(0.05)
                a.schedule(0, "one")
                a.schedule(0, "two")

            threading.Thread(target=work, daemon=True).start()

        def reaction_function_1(self, a):
            LOG.append((elapsed(), a.value))
            if len(LOG) == 2:
                request_stop()

    k = Kit(fast=False, keepalive=True, timeout=10 * 10**9)
    m = k.add(
        "Main",
        R,
        actions=[act("a", origin="physical", min_delay=MSEC(10))],
        timers=[("far", 5 * 10**9, 0)],
    )
    k.reaction(m, ["startup"], effects=[("action", "a")])
    k.reaction(m, [("action", "a")])
    t0 = time.monotonic()
    assert k.run() == 0
    assert time.monotonic() - t0 < 2.0  # the far timer did not hold it up
    assert [v for _, v in LOG] == ["one", "two"]
    (t1, m1), (t2, m2) = LOG[0][0], LOG[1][0]
    assert t1 >= MSEC(60) and (t2, m2) > (t1, m1)


def test_physical_action_from_reaction_is_strictly_later():
    class R(ReactorBase):
        def reaction_function_0(self, a):
            a.schedule(0, "p")

        def reaction_function_1(self, a):
            LOG.append(elapsed())
            request_stop()

    k = Kit(fast=False, keepalive=True)
    m = k.add("Main", R, actions=[act("a", origin="physical")])
    k.reaction(m, ["startup"], effects=[("action", "a")])
    k.reaction(m, [("action", "a")])
    assert k.run() == 0
    assert LOG[0] > (0, 0)


def test_keepalive_runs_until_timeout_and_stop_from_thread():
    class R(ReactorBase):
        def reaction_function_0(self):
            threading.Timer(0.05, request_stop).start()

        def reaction_function_1(self):
            LOG.append(elapsed())

    k = Kit(fast=False, keepalive=True)
    m = k.add("Main", R)
    k.reaction(m, ["startup"])
    k.reaction(m, ["shutdown"])
    t0 = time.monotonic()
    assert k.run() == 0
    assert 0.04 < time.monotonic() - t0 < 2.0
    assert LOG and LOG[0][0] == 0 and LOG[0][1] == 1

    LOG.clear()
    k = Kit(fast=False, keepalive=True, timeout=MSEC(50))
    m = k.add("Main", R)
    k.reaction(m, [])
    k.reaction(m, ["shutdown"])
    assert k.run() == 0
    assert LOG == [(MSEC(50), 0)]


def test_many_threads_schedule_physical_action():
    n_threads, per = 20, 50

    class R(ReactorBase):
        def _lf_init_state(self):
            self.seen = 0

        def reaction_function_0(self, a):
            def work():
                for _ in range(per):
                    a.schedule(0, 1)

            ts = [threading.Thread(target=work) for _ in range(n_threads)]
            for t in ts:
                t.start()

        def reaction_function_1(self, a):
            self.seen += a.value
            LOG.append(elapsed())
            if self.seen == n_threads * per:
                request_stop()

    k = Kit(fast=False, keepalive=True, timeout=20 * 10**9)
    m = k.add("Main", R, actions=[act("a", origin="physical")])
    k.reaction(m, ["startup"], effects=[("action", "a")])
    k.reaction(m, [("action", "a")])
    assert k.run() == 0
    assert len(LOG) == n_threads * per
    assert len(set(LOG)) == len(LOG)  # every event at its own tag
