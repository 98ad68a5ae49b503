"""Core execution semantics: startup/shutdown, timers, ports, hierarchy, multiports, banks,
ordering, termination (spec §2.2-§2.7, §3.1-§3.10)."""

import pytest
from runtime_fixtures.graphkit import Kit, act

from reactors.api import MSEC, Make, ReactorBase, lf, request_stop
from reactors.model.references import BankArg, BankPortsArg, ChannelKey, ChannelsArg

LOG = []


@pytest.fixture(autouse=True)
def _clear():
    LOG.clear()


def elapsed():
    t = lf.tag()
    return (t.time - lf.time.start(), t.microstep)


class Empty(ReactorBase):
    pass


def test_startup_and_shutdown_at_timeout_zero():
    class R(ReactorBase):
        def reaction_function_0(self):
            LOG.append(("startup", elapsed()))

        def reaction_function_1(self):
            LOG.append(("shutdown", elapsed()))

    k = Kit(timeout=0)
    m = k.add("Main", R)
    k.reaction(m, ["startup"])
    k.reaction(m, ["shutdown"])
    assert k.run() == 0
    assert LOG == [("startup", (0, 0)), ("shutdown", (0, 0))]


def test_timers_and_timeout():
    class R(ReactorBase):
        def reaction_function_0(self):
            LOG.append(("t1", elapsed()))

        def reaction_function_1(self):
            LOG.append(("t2", elapsed()))

        def reaction_function_2(self):
            LOG.append(("both", elapsed()))

    k = Kit(timeout=MSEC(10))
    m = k.add("Main", R, timers=[("t1", 0, MSEC(5)), ("t2", MSEC(3), MSEC(4))])
    k.reaction(m, [("timer", "t1")])
    k.reaction(m, [("timer", "t2")])
    k.reaction(m, [("timer", "t1"), ("timer", "t2")])
    assert k.run() == 0
    t1 = [e[1] for e in LOG if e[0] == "t1"]
    t2 = [e[1] for e in LOG if e[0] == "t2"]
    both = [e[1] for e in LOG if e[0] == "both"]
    assert t1 == [(0, 0), (MSEC(5), 0), (MSEC(10), 0)]
    assert t2 == [(MSEC(3), 0), (MSEC(7), 0)]
    assert both == sorted(set(t1) | set(t2))  # once per tag even when both fire


def test_timer_once_like_startup():
    class R(ReactorBase):
        def reaction_function_0(self):
            LOG.append(elapsed())

    k = Kit()
    m = k.add("Main", R, timers=[("t", 0, 0)])
    k.reaction(m, [("timer", "t")])
    assert k.run() == 0
    assert LOG == [(0, 0)]


class Source(ReactorBase):
    def _lf_init_state(self):
        self.n = 0

    def reaction_function_0(self, out):
        self.n += 1
        if self.n % 2:
            out.set(self.n)


class Sink(ReactorBase):
    def reaction_function_0(self, inp):
        LOG.append((elapsed()[0], inp.value, inp.is_present))


def test_ports_presence_and_persistence():
    class Probe(ReactorBase):
        def reaction_function_0(self, inp):
            LOG.append(("probe", inp.value, inp.is_present))

    k = Kit(timeout=MSEC(3))
    main = k.add("Main", Empty)
    s = k.add("s", Source, parent=main, ports=["out"], timers=[("t", 0, MSEC(1))])
    d = k.add("d", Sink, parent=main, ports=["inp"])
    p = k.add("p", Probe, parent=main, ports=["inp"], timers=[("t", 0, MSEC(1))])
    k.reaction(s, [("timer", "t")], effects=[("port", s, "out")])
    k.reaction(d, [("port", d, "inp")])
    k.reaction(p, [("timer", "t")], sources=[("port", p, "inp")])
    k.connect(s, "out", d, "inp")
    k.connect(s, "out", p, "inp")
    assert k.run() == 0
    assert [e for e in LOG if e[0] != "probe"] == [(0, 1, True), (MSEC(2), 3, True)]
    # the value persists while absent (PersistentInputs)
    assert [e for e in LOG if e[0] == "probe"] == [
        ("probe", 1, True),
        ("probe", 1, False),
        ("probe", 3, True),
        ("probe", 3, False),
    ]


def test_port_value_is_read_only_and_shared():
    obj = [1, 2]

    class Src(ReactorBase):
        def reaction_function_0(self, out):
            out.set(obj)
            with pytest.raises(AttributeError):
                out.value = 5
            LOG.append(("width", out.width))
            with pytest.raises(TypeError):
                len(out)

    class Dst(ReactorBase):
        def reaction_function_0(self, inp):
            LOG.append(("same", inp.value is obj))

    k = Kit()
    main = k.add("Main", Empty)
    s = k.add("s", Src, parent=main, ports=["out"])
    d = k.add("d", Dst, parent=main, ports=["inp"])
    k.reaction(s, ["startup"], effects=[("port", s, "out")])
    k.reaction(d, [("port", d, "inp")])
    k.connect(s, "out", d, "inp")
    assert k.run() == 0
    assert LOG == [("width", -2), ("same", True)]


def test_hierarchy_pass_through_and_contained_capsules():
    class Inner(ReactorBase):
        def reaction_function_0(self, inp, out):
            out.set(inp.value * 10)

    class Main(ReactorBase):
        def reaction_function_0(self, w):
            w.inp.set(4)

        def reaction_function_1(self, w):
            LOG.append(("main", w.out.value, w.out.is_present))

    k = Kit()
    main = k.add("Main", Main)
    w = k.add("w", Empty, parent=main, ports=["inp", "out"])
    i = k.add("i", Inner, parent=w, ports=["inp", "out"])
    k.reaction(i, [("port", i, "inp")], effects=[("port", i, "out")])
    k.reaction(main, ["startup"], effects=[("port", w, "inp")])
    k.reaction(main, [("port", w, "out")])
    k.connect(w, "inp", i, "inp")  # own input -> contained input
    k.connect(i, "out", w, "out")  # contained output -> own output
    assert k.run() == 0
    assert LOG == [("main", 40, True)]


def test_multiports_and_only_present_channels_trigger():
    class Src(ReactorBase):
        def reaction_function_0(self, out):
            assert len(out) == 3 and out.width == 3
            assert out.value is None and out.is_present is False
            with pytest.raises(TypeError):
                out[0] = 1
            out[0].set("a")
            out[2].set("c")

    class Dst(ReactorBase):
        def reaction_function_0(self, inp):
            LOG.append([(ch.value, ch.is_present) for ch in inp])

    class One(ReactorBase):
        def reaction_function_0(self, inp):
            LOG.append(("one", self.bank_index, inp.value))

    k = Kit()
    main = k.add("Main", Empty)
    s = k.add("s", Src, parent=main, ports=[("out", 3)])
    d = k.add("d", Dst, parent=main, ports=[("inp", 3)])
    ones = [k.add(f"b[{i}]", One, parent=main, ports=["inp"], bank_index=i) for i in range(3)]
    k.reaction(s, ["startup"], effects=[("port", s, "out")])
    k.reaction(d, [("port", d, "inp")])
    for b in ones:
        k.reaction(b, [("port", b, "inp")])
    k.connect(s, "out", d, "inp", width=3)
    for i, b in enumerate(ones):
        k.connect(s, "out", b, "inp", src_ch=i)
    assert k.run() == 0
    assert [("a", True), (None, False), ("c", True)] in LOG
    assert sorted(e for e in LOG if e[0] == "one") == [("one", 0, "a"), ("one", 2, "c")]


def test_bank_capsules_and_params():
    class Member(ReactorBase):
        scale = ReactorBase.parameter("scale")

        def reaction_function_0(self, out):
            out.set(self.bank_index * self.scale)

    class Main(ReactorBase):
        def reaction_function_0(self, b):
            LOG.append([m.out.value for m in b])

    k = Kit()
    main = k.add("Main", Main)
    ms = [
        k.add(f"b[{i}]", Member, parent=main, ports=["out"], bank_index=i, params={"scale": 10})
        for i in range(3)
    ]
    for r in ms:
        k.reaction(r, ["startup"], effects=[("port", r, "out")])
    k.reaction(
        main,
        [("port", r, "out") for r in ms],
        args=[BankArg("b", tuple(ms), ("out",))],
    )
    assert k.run() == 0
    assert LOG == [[0, 10, 20]]


def test_parameters_are_read_only():
    class R(ReactorBase):
        p = ReactorBase.parameter("p")

        def reaction_function_0(self):
            LOG.append(self.p)
            with pytest.raises(AttributeError):
                self.p = 3
            with pytest.raises(AttributeError):
                self.bank_index = 3

    k = Kit()
    m = k.add("Main", R, params={"p": 7})
    k.reaction(m, ["startup"])
    assert k.run() == 0
    assert LOG == [7]


def test_double_trigger_runs_once_and_rank_order():
    class Src(ReactorBase):
        def reaction_function_0(self, a, b):
            LOG.append("src")
            a.set(1)
            b.set(2)

    class Dst(ReactorBase):
        def reaction_function_0(self, a, b):
            LOG.append(("dst", a.value + b.value))

    k = Kit()
    main = k.add("Main", Empty)
    d = k.add("d", Dst, parent=main, ports=["a", "b"])  # created first: rank decides order
    s = k.add("s", Src, parent=main, ports=["a", "b"])
    k.reaction(d, [("port", d, "a"), ("port", d, "b")])
    k.reaction(s, ["startup"], effects=[("port", s, "a"), ("port", s, "b")])
    k.connect(s, "a", d, "a")
    k.connect(s, "b", d, "b")
    assert k.run() == 0
    assert LOG == ["src", ("dst", 3)]


def test_previous_output_visible_to_later_reaction():
    class R(ReactorBase):
        def reaction_function_0(self, out):
            out.set(21)

        def reaction_function_1(self, out):
            LOG.append((out.is_present, out.value))

    k = Kit()
    m = k.add("Main", R, ports=["out"])
    k.reaction(m, ["startup"], effects=[("port", m, "out")])
    k.reaction(m, ["startup"], effects=[("port", m, "out")])
    assert k.run() == 0
    assert LOG == [(True, 21)]


def test_unconnected_input_and_triggerless_reaction():
    class R(ReactorBase):
        def reaction_function_0(self, inp):
            LOG.append((inp.value, inp.is_present))

        def reaction_function_1(self):
            LOG.append("never")

    k = Kit()
    m = k.add("Main", R, ports=["inp"])
    k.reaction(m, ["startup"], sources=[("port", m, "inp")])
    k.reaction(m, [])
    assert k.run() == 0
    assert LOG == [(None, False)]


def test_request_stop_next_microstep_and_final_tag():
    class R(ReactorBase):
        def reaction_function_0(self, a):
            LOG.append(("a", elapsed()))
            if lf.tag().microstep == 3:
                request_stop()
            a.schedule(0)

        def reaction_function_1(self):
            LOG.append(("shutdown", elapsed()))
            lf.request_stop()  # no effect in the final tag

    k = Kit()
    m = k.add("Main", R, actions=[act("a")])
    k.reaction(m, ["startup", ("action", "a")], effects=[("action", "a")])
    k.reaction(m, ["shutdown"])
    assert k.run() == 0
    assert LOG == [("a", (0, i)) for i in range(5)] + [("shutdown", (0, 4))]


def test_starvation_stops_at_next_microstep():
    class R(ReactorBase):
        def _lf_init_state(self):
            self.n = 0

        def reaction_function_0(self, a):
            self.n += 1
            if self.n < 5:
                a.schedule(0)

        def reaction_function_1(self):
            LOG.append(elapsed())

    k = Kit()
    m = k.add("Main", R, actions=[act("a")])
    k.reaction(m, ["startup", ("action", "a")], effects=[("action", "a")])
    k.reaction(m, ["shutdown"])
    assert k.run() == 0
    assert LOG == [(0, 5)]


def test_timeout_last_tag_and_stop_after_timeout():
    class R(ReactorBase):
        def reaction_function_0(self):
            LOG.append(("t", elapsed()))

        def reaction_function_1(self):
            LOG.append(("shutdown", elapsed()))

    k = Kit(timeout=MSEC(11))
    m = k.add("Main", R, timers=[("t", 0, MSEC(1))])
    k.reaction(m, [("timer", "t")])
    k.reaction(m, ["shutdown"])
    assert k.run() == 0
    assert LOG[-2:] == [("t", (MSEC(11), 0)), ("shutdown", (MSEC(11), 0))]
    assert len(LOG) == 13


def test_lf_namespace_values():
    class R(ReactorBase):
        def reaction_function_0(self):
            assert lf.time.logical() == lf.time.start() == lf.tag().time
            assert lf.time.logical_elapsed() == 0
            assert lf.time.physical() >= lf.time.start() - MSEC(100)
            assert lf.time.physical_elapsed() >= -MSEC(100)
            assert lf.source_directory() == "/tmp/src"
            assert lf.package_directory() == "/tmp"
            assert self.register_user_trace_event("x") != 0
            self.tracepoint_user_event(1)
            self.tracepoint_user_value(1, 5)
            assert lf.tag_compare(lf.tag(), lf.Tag(lf.time.start(), 0)) == 0
            LOG.append("ok")

    k = Kit()
    m = k.add("Main", R)
    k.reaction(m, ["startup"])
    assert k.run() == 0
    assert LOG == ["ok"]


def test_mutable_input_gets_a_private_deep_copy():
    class Src(ReactorBase):
        def reaction_function_0(self, out):
            out.set([1, [2]])

    class Scale(ReactorBase):
        def reaction_function_0(self, inp):
            inp.value[1].append(3)
            inp.value = inp.value + ["x"]
            LOG.append(("scale", inp.value, inp.is_present))

    class Reader(ReactorBase):
        def reaction_function_0(self, inp):
            LOG.append(("reader", inp.value))

    k = Kit()
    main = k.add("Main", Empty)
    s = k.add("s", Src, parent=main, ports=["out"])
    c = k.add("c", Scale, parent=main, ports=["inp"])
    r = k.add("r", Reader, parent=main, ports=["inp"])
    k.reaction(s, ["startup"], effects=[("port", s, "out")])
    k.reaction(c, [("port", c, "inp")], mutable=["inp"])
    k.reaction(r, [("port", r, "inp")])
    k.connect(s, "out", c, "inp")
    k.connect(s, "out", r, "inp")
    assert k.run() == 0
    assert ("scale", [1, [2, 3], "x"], True) in LOG
    assert ("reader", [1, [2]]) in LOG


def test_mode_local_forward_function():
    class Src(ReactorBase):
        def reaction_function_0(self, out):
            out[1].set("v")

    class Dst(ReactorBase):
        def reaction_function_0(self, inp):
            LOG.append([(c.value, c.is_present) for c in inp])

    k = Kit()
    main = k.add("Main", Empty)
    s = k.add("s", Src, parent=main, ports=[("out", 2)])
    d = k.add("d", Dst, parent=main, ports=[("inp", 2)])
    k.reaction(s, ["startup"], effects=[("port", s, "out")])
    k.reaction(
        main,
        [("port", s, "out")],
        effects=[("port", d, "inp")],
        function="_lf_forward",
        args=[
            ChannelsArg("src", (ChannelKey(s, "out", 0), ChannelKey(s, "out", 1))),
            ChannelsArg("dst", (ChannelKey(d, "inp", 0), ChannelKey(d, "inp", 1))),
        ],
    )
    k.reaction(d, [("port", d, "inp")])
    assert k.run() == 0
    assert LOG == [[(None, False), ("v", True)]]


def test_make_is_a_plain_bag():
    m = Make(a=1)
    m.b = 2
    assert (m.a, m.b) == (1, 2)
    with pytest.raises(AttributeError):
        _ = m.c


def test_start_time_multiple_option():
    class R(ReactorBase):
        def reaction_function_0(self):
            LOG.append(lf.time.start() % MSEC(50))

    k = Kit()
    m = k.add("Main", R)
    k.reaction(m, ["startup"])
    assert k.run("-m", "50", "msec") == 0
    assert LOG == [0]


def test_bank_ports_argument_and_transport_trigger():
    class Member(ReactorBase):
        def reaction_function_0(self, out):
            out.set(self.bank_index + 100)

    class Main(ReactorBase):
        def reaction_function_0(self, b_out):
            LOG.append([p.value for p in b_out])

    k = Kit()
    main = k.add("Main", Main)
    ms = [k.add(f"b[{i}]", Member, parent=main, ports=["out"], bank_index=i) for i in range(2)]
    for r in ms:
        k.reaction(r, ["startup"], effects=[("port", r, "out")])
    k.reaction(
        main,
        [("port", r, "out") for r in ms],
        args=[BankPortsArg("b_out", tuple(ms), "out")],
    )
    assert k.run() == 0
    assert LOG == [[100, 101]]


def test_port_trigger_marks_present_without_changing_value():
    from reactors.core.port import Port

    marked, rq = [], []
    p = Port("x")
    p._mark, p._rq, p._triggers = marked.append, rq, (3, 1)
    p._v = "filled by a transport"
    p.trigger()
    p.trigger()
    assert p.is_present and p.value == "filled by a transport"
    assert marked == [p] and sorted(rq) == [1, 3]


def test_channels_that_trigger_the_same_reactions_queue_them_once_per_tag():
    from reactors.core.port import Port, group_fan_ins

    marked, rq = [], []
    ports = [Port(f"obs[{i}]") for i in range(3)]
    lone = Port("lone")
    for p in [*ports, lone]:
        p._mark, p._rq = marked.append, rq
    for p in ports:
        p._triggers = (5, 7)
    lone._triggers = (5,)
    group_fan_ins([*ports, lone])
    fan = ports[0]._fan
    assert fan is not None and all(p._fan is fan for p in ports) and lone._fan is None

    def next_tag():  # what the engine does when it advances
        for p in marked:
            p._p = False
        marked.clear()
        rq.clear()

    ports[0].set("a")
    ports[2]._v = "from a transport"
    ports[2].trigger()
    ports[1].set("b")
    ports[0].set("again")
    assert sorted(rq) == [5, 7] and marked == [ports[0], ports[2], ports[1]]
    assert [p.value for p in ports] == ["again", "b", "from a transport"]
    next_tag()
    ports[0].set("c")  # the first of the last tag is first again
    assert sorted(rq) == [5, 7]
    next_tag()
    ports[2].set("d")  # another one first; the last tag's first comes later
    ports[0].set("e")
    assert sorted(rq) == [5, 7] and ports[0].is_present and not ports[1].is_present
    next_tag()
    lone.set(1)  # a channel outside the group queues its own
    ports[1].set(2)
    assert sorted(rq) == [5, 5, 7]
