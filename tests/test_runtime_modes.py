"""Modal reactors: transitions, reset/history, timers, actions, startup/reset/shutdown in
modes, reset state, hierarchy (spec §2.5, §3.12)."""

import pytest
from runtime_fixtures.graphkit import Kit, act

from reactors.api import MSEC, ReactorBase, lf

LOG = []


@pytest.fixture(autouse=True)
def _clear():
    LOG.clear()


def ms():
    t = lf.tag()
    return ((t.time - lf.time.start()) // MSEC(1), t.microstep)


def test_transitions_alternate_modes():
    class R(ReactorBase):
        def reaction_function_0(self, B):
            LOG.append(("A", ms()))
            B.set()

        def reaction_function_1(self, A):
            LOG.append(("B", ms()))
            A.set()

    k = Kit(timeout=MSEC(4))
    m = k.add("Main", R, modes=["A", "B"], timers=[("t", 0, MSEC(1))])
    k.reaction(m, [("timer", "t")], effects=[("mode", "B", "reset")], mode="A")
    k.reaction(m, [("timer", "t")], effects=[("mode", "A", "history")], mode="B")
    assert k.run() == 0
    assert LOG == [("A", (0, 0)), ("B", (1, 0)), ("A", (2, 0)), ("B", (3, 0)), ("A", (4, 0))]


def timers_program(transition):
    class R(ReactorBase):
        def reaction_function_0(self):
            LOG.append(ms())

        def reaction_function_1(self, B):
            B.set()

        def reaction_function_2(self, A):
            A.set()

    k = Kit(timeout=MSEC(22))
    m = k.add(
        "Main", R, modes=["A", "B"], timers=[("T", 0, MSEC(3), "A"), ("switch", MSEC(5), MSEC(5))]
    )
    k.reaction(m, [("timer", "T")], mode="A")
    k.reaction(m, [("timer", "switch")], effects=[("mode", "B", "reset")], mode="A")
    k.reaction(m, [("timer", "switch")], effects=[("mode", "A", transition)], mode="B")
    return k


def test_mode_timers_restart_on_reset():
    assert timers_program("reset").run() == 0
    assert LOG == [(0, 0), (3, 0), (10, 1), (13, 0), (20, 1)]


def test_mode_timers_continue_on_history():
    assert timers_program("history").run() == 0
    assert LOG == [(0, 0), (3, 0), (11, 0), (14, 0), (22, 0)]


@pytest.mark.parametrize("transition,expect", [("history", [("a", (13, 0))]), ("reset", [])])
def test_mode_actions_suspended(transition, expect):
    class R(ReactorBase):
        def reaction_function_0(self, a):
            a.schedule(MSEC(5))

        def reaction_function_1(self, a):
            LOG.append(("a", ms()))

        def reaction_function_2(self, B):
            B.set()

        def reaction_function_3(self, A):
            A.set()

    k = Kit(timeout=MSEC(30))
    m = k.add(
        "Main",
        R,
        modes=["A", "B"],
        actions=[act("a", mode="A")],
        timers=[("leave", MSEC(2), 0), ("back", MSEC(10), 0)],
    )
    k.reaction(m, ["startup"], effects=[("action", "a")], mode="A")
    k.reaction(m, [("action", "a")], mode="A")
    k.reaction(m, [("timer", "leave")], effects=[("mode", "B", "reset")], mode="A")
    k.reaction(m, [("timer", "back")], effects=[("mode", "A", transition)], mode="B")
    assert k.run() == 0
    assert LOG == expect


def test_startup_reset_shutdown_in_modes():
    class R(ReactorBase):
        def _rec(self, what):
            LOG.append((what, ms()))

        def reaction_function_0(self):
            self._rec("startup A")

        def reaction_function_1(self):
            self._rec("reset A")

        def reaction_function_2(self):
            self._rec("shutdown A")

        def reaction_function_3(self, B):
            B.set()

        def reaction_function_4(self):
            self._rec("startup B")

        def reaction_function_5(self):
            self._rec("reset B")

        def reaction_function_6(self):
            self._rec("shutdown B")

        def reaction_function_7(self, A):
            A.set()

        def reaction_function_8(self):
            self._rec("startup C")

        def reaction_function_9(self):
            self._rec("shutdown C")

    k = Kit(timeout=MSEC(5))
    m = k.add("Main", R, modes=["A", "B", "C"], timers=[("t1", MSEC(1), 0), ("t3", MSEC(3), 0)])
    k.reaction(m, ["startup"], mode="A")
    k.reaction(m, ["reset"], mode="A")
    k.reaction(m, ["shutdown"], mode="A")
    k.reaction(m, [("timer", "t1")], effects=[("mode", "B", "reset")], mode="A")
    k.reaction(m, ["startup"], mode="B")
    k.reaction(m, ["reset"], mode="B")
    k.reaction(m, ["shutdown"], mode="B")
    k.reaction(m, [("timer", "t3")], effects=[("mode", "A", "history")], mode="B")
    k.reaction(m, ["startup"], mode="C")
    k.reaction(m, ["shutdown"], mode="C")
    assert k.run() == 0
    # the queue is empty after 3 ms: starvation stops at (3, 1); C was never active
    assert LOG == [
        ("startup A", (0, 0)),
        ("startup B", (1, 1)),
        ("reset B", (1, 1)),
        ("shutdown A", (3, 1)),
        ("shutdown B", (3, 1)),
    ]


def test_reset_into_current_mode_runs_reset_reactions_again():
    class R(ReactorBase):
        def reaction_function_0(self):
            LOG.append(("startup", ms()))

        def reaction_function_1(self):
            LOG.append(("reset", ms()))

        def reaction_function_2(self, A):
            A.set()

    k = Kit(timeout=MSEC(2))
    m = k.add("Main", R, modes=["A"], timers=[("t", MSEC(1), MSEC(1))])
    k.reaction(m, ["startup"], mode="A")
    k.reaction(m, ["reset"], mode="A")
    k.reaction(m, [("timer", "t")], effects=[("mode", "A", "reset")], mode="A")
    assert k.run() == 0
    # the timer restarts at 1 ms + offset = 2 ms, the stop tag: its reset lands past the end
    assert LOG == [("startup", (0, 0)), ("reset", (1, 1))]


class Counter(ReactorBase):
    """A modal reactor whose mode B holds a `reset state count`."""

    def _lf_init_state(self):
        self.count = 0

    def _lf_reset_state(self, mode):
        if mode is None or mode == "B":
            self.count = 0

    def reaction_function_0(self, B):
        B.set()

    def reaction_function_1(self, A):
        self.count += 1
        LOG.append((self._lf_name, self.count))
        A.set()


def counter_program(into_b):
    k = Kit(timeout=MSEC(5))
    m = k.add("Main", Counter, modes=["A", "B"], timers=[("t", 0, MSEC(1))])
    k.reaction(m, [("timer", "t")], effects=[("mode", "B", into_b)], mode="A")
    k.reaction(m, [("timer", "t")], effects=[("mode", "A", "history")], mode="B")
    return k


def test_reset_state_on_reset_entry():
    assert counter_program("reset").run() == 0
    assert [c for _, c in LOG] == [1, 1, 1]


def test_state_kept_on_history_entry():
    assert counter_program("history").run() == 0
    assert [c for _, c in LOG] == [1, 2, 3]


def test_inactive_mode_reactions_and_contained_instances_are_silent():
    class Child(ReactorBase):
        def reaction_function_0(self):
            LOG.append(("child", ms()))

    class Main(ReactorBase):
        def reaction_function_0(self, out):
            out.set(1)

        def reaction_function_1(self, inp):
            LOG.append(("A got", ms()))

        def reaction_function_2(self, inp):
            LOG.append(("B got", ms()))

        def reaction_function_3(self, B):
            B.set()

    k = Kit(timeout=MSEC(3))
    m = k.add(
        "Main",
        Main,
        modes=["A", "B"],
        ports=["out", "inp"],
        timers=[("t", 0, MSEC(1)), ("go", MSEC(2), 0)],
    )
    c = k.add("c", Child, parent=m, mode="B", timers=[("ct", 0, MSEC(1))])
    k.reaction(m, [("timer", "t")], effects=[("port", m, "out")])
    k.reaction(m, [("port", m, "inp")], mode="A")
    k.reaction(m, [("port", m, "inp")], mode="B")
    k.reaction(m, [("timer", "go")], effects=[("mode", "B", "reset")], mode="A")
    k.reaction(c, [("timer", "ct")])
    k.connect(m, "out", m, "inp")
    assert k.run() == 0
    assert LOG == [
        ("A got", (0, 0)),
        ("A got", (1, 0)),
        ("A got", (2, 0)),
        ("child", (2, 1)),
        ("child", (3, 0)),
        ("B got", (3, 0)),
    ]


def nested_program(outer_back):
    """Outer (modes X, Y) holds Inner (modes P, Q) in mode X."""

    class Inner(ReactorBase):
        def _lf_init_state(self):
            self.resets = 0

        def _lf_reset_state(self, mode):
            self.resets += 1

        def reaction_function_0(self, Q):
            LOG.append(("P", ms()))
            Q.set()

        def reaction_function_1(self):
            LOG.append(("Q", ms()))

    class Outer(ReactorBase):
        def reaction_function_0(self, Y):
            Y.set()

        def reaction_function_1(self, X):
            X.set()

    k = Kit(timeout=MSEC(6))
    o = k.add("Main", Outer, modes=["X", "Y"], timers=[("leave", MSEC(2), 0), ("back", MSEC(4), 0)])
    i = k.add("i", Inner, parent=o, mode="X", modes=["P", "Q"], timers=[("t", 0, MSEC(1))])
    k.reaction(o, [("timer", "leave")], effects=[("mode", "Y", "reset")], mode="X")
    k.reaction(o, [("timer", "back")], effects=[("mode", "X", outer_back)], mode="Y")
    k.reaction(i, [("timer", "t")], effects=[("mode", "Q", "history")], mode="P")
    k.reaction(i, [("timer", "t")], mode="Q")
    return k


def test_hierarchical_reset_returns_nested_to_initial_mode():
    assert nested_program("reset").run() == 0
    # inner timer restarts at (4, 1) in initial mode P, then Q
    assert LOG == [
        ("P", (0, 0)),
        ("Q", (1, 0)),
        ("Q", (2, 0)),
        ("P", (4, 1)),
        ("Q", (5, 0)),
        ("Q", (6, 0)),
    ]


def test_history_keeps_nested_mode():
    assert nested_program("history").run() == 0
    # leave at 2 ms with the inner timer due at 3 ms: it resumes 1 ms after re-entry
    assert LOG == [("P", (0, 0)), ("Q", (1, 0)), ("Q", (2, 0)), ("Q", (5, 0)), ("Q", (6, 0))]
