"""Elaboration: channel order of banks, multiports, interleaved and broadcast (spec §1.14)."""

from lfsrc import channels_into, compile_text

SRC = """
target Python
reactor S(w = 1) { output[w] out }
reactor D(w = 1) { input[w] inp }
"""


def test_bank_of_multiports_is_bank_major(tmp_path):
    f, _ = compile_text(
        tmp_path,
        SRC
        + """
main reactor Main { s = new[2] S(w = 3)  d = new D(w = 6)  s.out -> d.inp }""",
    )
    assert channels_into(f, "Main.d", "inp") == [
        ("Main.s[0]", 0),
        ("Main.s[0]", 1),
        ("Main.s[0]", 2),
        ("Main.s[1]", 0),
        ("Main.s[1]", 1),
        ("Main.s[1]", 2),
    ]


def test_interleaved_is_port_major(tmp_path):
    f, _ = compile_text(
        tmp_path,
        SRC
        + """
main reactor Main { s = new[2] S(w = 2)  d = new D(w = 4)  interleaved(s.out) -> d.inp }""",
    )
    assert channels_into(f, "Main.d", "inp") == [
        ("Main.s[0]", 0),
        ("Main.s[1]", 0),
        ("Main.s[0]", 1),
        ("Main.s[1]", 1),
    ]


def test_broadcast_repeats_the_left_side(tmp_path):
    f, _ = compile_text(
        tmp_path,
        SRC
        + """
main reactor Main { s = new S()  d = new[3] D()  (s.out)+ -> d.inp }""",
    )
    for k in range(3):
        assert channels_into(f, f"Main.d[{k}]", "inp") == [("Main.s", 0)]


def test_lists_concatenate_left_to_right(tmp_path):
    f, _ = compile_text(
        tmp_path,
        SRC
        + """
main reactor Main { a = new S(w = 3)  b = new S(w = 2)  d = new D(w = 5)  a.out, b.out -> d.inp }""",
    )
    assert channels_into(f, "Main.d", "inp") == [
        ("Main.a", 0),
        ("Main.a", 1),
        ("Main.a", 2),
        ("Main.b", 0),
        ("Main.b", 1),
    ]


def test_width_mismatch_leaves_surplus_unconnected_with_warning(tmp_path):
    f, rep = compile_text(
        tmp_path,
        SRC
        + """
main reactor Main { s = new S(w = 2)  d = new D(w = 3)  s.out -> d.inp }""",
    )
    assert channels_into(f, "Main.d", "inp") == [("Main.s", 0), ("Main.s", 1), None]
    assert any("widths differ" in d.message for d in rep.diagnostics)


def test_after_is_lowered_to_a_delay_instance_per_source_channel(tmp_path):
    f, _ = compile_text(
        tmp_path,
        SRC
        + """
main reactor Main { s = new S(w = 2)  d = new[2] D()  s.out -> d.inp after 10 msec }""",
    )
    delays = [i for i in f.prog.instances if i.synthetic == "delay"]
    assert len(delays) == 2
    assert all(i.actions[0].min_delay == 10_000_000 for i in delays)
    assert channels_into(f, "Main.d[0]", "inp") == [(delays[0].name, 0)]
    assert channels_into(f, "Main.d[1]", "inp") == [(delays[1].name, 0)]


def test_parameters_resolve_through_the_hierarchy(tmp_path):
    f, _ = compile_text(
        tmp_path,
        """
target Python
reactor Leaf(w = 1) { output[w] out }
reactor Mid(k = 2) { leaf = new Leaf(w = k) }
main reactor Main(n = 4) { m = new Mid(k = n) }""",
    )
    leaf = next(i for i in f.prog.instances if i.name == "Main.m.leaf")
    assert leaf.ports["out"].width == 4


def test_bank_index_parameter_gets_the_member_index(tmp_path):
    f, _ = compile_text(
        tmp_path,
        """
target Python
reactor A(bank_index = 0, w = 1) { output[w] out }
main reactor Main { a = new[3] A() }""",
    )
    assert [i.params["bank_index"] for i in f.prog.instances if i.short == "a"] == [0, 1, 2]


def test_connection_in_a_mode_becomes_a_forwarding_reaction(tmp_path):
    f, _ = compile_text(
        tmp_path,
        """
target Python
reactor R {
  input inp
  output out
  initial mode A { inp -> out }
  mode B { reaction(inp) -> out {= out.set(0) =} }
}
main reactor Main { r = new R() }""",
    )
    r = next(i for i in f.prog.instances if i.name == "Main.r")
    fwd = [x for x in r.reactions if x.function == "_lf_forward"]
    assert len(fwd) == 1 and fwd[0].mode == "A"
    assert fwd[0].args[0]["channels"] == [[r.id, "inp", 0]]
    assert fwd[0].args[1]["channels"] == [[r.id, "out", 0]]
    assert f.prog.edges == []
