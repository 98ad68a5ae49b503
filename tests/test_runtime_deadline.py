"""Deadlines: handler instead of body, check/update_deadline, priority (spec §2.6, §2.8,
§3.5, §3.7)."""

import time

import pytest
from runtime_fixtures.graphkit import Kit

from reactors.api import MSEC, ReactorBase, lf

LOG = []


@pytest.fixture(autouse=True)
def _clear():
    LOG.clear()


class Slow(ReactorBase):
    sleep = ReactorBase.parameter("sleep")

    def reaction_function_0(self, out):
        time.sleep(self.sleep)
        out.set(1)


class Guarded(ReactorBase):
    def reaction_function_0(self, inp, out):
        LOG.append("body")
        out.set("body")

    def deadline_function_0(self, inp, out):
        LOG.append("handler")
        out.set("handler")


class Watch(ReactorBase):
    def reaction_function_0(self, inp):
        LOG.append(("downstream", inp.value))


def pipeline(sleep, deadline):
    k = Kit()
    main = k.add("Main", ReactorBase)
    s = k.add("s", Slow, parent=main, ports=["out"], params={"sleep": sleep})
    g = k.add("g", Guarded, parent=main, ports=["inp", "out"])
    w = k.add("w", Watch, parent=main, ports=["inp"])
    k.reaction(s, ["startup"], effects=[("port", s, "out")])
    k.reaction(g, [("port", g, "inp")], effects=[("port", g, "out")], deadline=deadline)
    k.reaction(w, [("port", w, "inp")])
    k.connect(s, "out", g, "inp")
    k.connect(g, "out", w, "inp")
    return k


def test_missed_deadline_runs_handler_and_its_outputs_propagate():
    assert pipeline(0.03, MSEC(10)).run() == 0
    assert LOG == ["handler", ("downstream", "handler")]


def test_met_deadline_runs_body():
    assert pipeline(0, MSEC(500)).run() == 0
    assert LOG == ["body", ("downstream", "body")]


def test_deadline_zero_always_runs_handler():
    assert pipeline(0, 0).run() == 0
    assert LOG == ["handler", ("downstream", "handler")]


def test_check_and_update_deadline():
    class R(ReactorBase):
        def reaction_function_0(self):
            assert self.check_deadline() is False  # no deadline: always False

        def reaction_function_1(self):
            assert self.check_deadline(False) is False
            time.sleep(0.02)
            assert lf.check_deadline(self, False) is True
            assert self.check_deadline(True) is True  # runs the handler now
            LOG.append("after check")

        def deadline_function_1(self):
            LOG.append("handler")

        def reaction_function_2(self):
            assert self.check_deadline() is False
            self.update_deadline(0)
            time.sleep(0.001)
            LOG.append(("updated", self.check_deadline(False)))
            with pytest.raises(ValueError):
                self.update_deadline(-1)

        def deadline_function_2(self):
            LOG.append("handler 2")

    k = Kit()
    m = k.add("Main", R)
    k.reaction(m, ["startup"])
    k.reaction(m, ["startup"], deadline=MSEC(10))
    k.reaction(m, ["startup"], deadline=MSEC(1000))
    assert k.run() == 0
    assert LOG == ["handler", "after check", ("updated", True)]


def test_deadline_priority_orders_same_level_reactions():
    class A(ReactorBase):
        def reaction_function_0(self):
            LOG.append("plain")

    class B(ReactorBase):
        def reaction_function_0(self):
            LOG.append("with deadline")

        def deadline_function_0(self):
            LOG.append("handler")

    k = Kit()
    main = k.add("Main", ReactorBase)
    a = k.add("a", A, parent=main)  # earlier instance, no deadline
    b = k.add("b", B, parent=main)
    k.reaction(a, ["startup"])
    k.reaction(b, ["startup"], deadline=MSEC(1000))
    assert k.run() == 0
    assert LOG == ["with deadline", "plain"]
