"""Levels, inferred deadlines, priority order and causality-loop reports (spec §3.5, §3.6)."""

from lfsrc import compile_text, errors_of


def reaction(f, inst: str, index: int = 0) -> int:
    """The id of reaction ``index`` of instance ``inst``."""
    i = next(i for i in f.prog.instances if i.name == inst)
    return next(r for r in i.reactions if r.index == index).id


def level(f, inst: str, index: int = 0) -> int:
    return f.analysis.levels[reaction(f, inst, index)]


CHAIN = """
target Python
reactor A { output out  reaction(startup) -> out {= out.set(1) =} }
reactor B { input inp  output out  reaction(inp) -> out {= out.set(inp.value) =} }
reactor C { input inp  reaction(inp) {= pass =} DEADLINE }
main reactor Main { a = new A()  b = new B()  c = new C()  a.out -> b.inp  b.out -> c.inp }
"""


def test_levels_follow_the_longest_path(tmp_path):
    f, _ = compile_text(tmp_path, CHAIN.replace("DEADLINE", ""))
    assert [level(f, n) for n in ("Main.a", "Main.b", "Main.c")] == [0, 1, 2]


def test_consecutive_reactions_of_one_reactor_are_ordered(tmp_path):
    f, _ = compile_text(
        tmp_path,
        """
target Python
main reactor Main {
  timer t
  reaction(t) {= pass =}
  reaction(startup) {= pass =}
  reaction(t) {= pass =}
}""",
    )
    assert [level(f, "Main", i) for i in range(3)] == [0, 1, 2]


def test_deadline_is_inferred_upstream(tmp_path):
    f, _ = compile_text(
        tmp_path,
        CHAIN.replace(
            "reaction(inp) {= pass =} DEADLINE",
            "reaction(inp) {= pass =} deadline(5 msec) {= pass =}",
        ),
    )
    assert [
        f.analysis.inferred_deadlines[reaction(f, n)] for n in ("Main.a", "Main.b", "Main.c")
    ] == [5_000_000] * 3


def test_deadline_orders_before_level(tmp_path):
    f, _ = compile_text(
        tmp_path,
        """
target Python
reactor Slow { timer t  reaction(t) {= pass =} }
reactor Urgent { timer t  output out  reaction(t) -> out {= out.set(1) =} }
reactor Sink { input inp  reaction(inp) {= pass =} deadline(1 msec) {= pass =} }
main reactor Main { s = new Slow()  u = new Urgent()  k = new Sink()  u.out -> k.inp }""",
    )
    ranks = {n: f.analysis.ranks[reaction(f, n)] for n in ("Main.s", "Main.u", "Main.k")}
    assert ranks["Main.u"] < ranks["Main.k"] < ranks["Main.s"]


def test_after_breaks_the_precedence_graph(tmp_path):
    f, _ = compile_text(
        tmp_path,
        """
target Python
reactor P { input inp  output out  reaction(inp) -> out {= out.set(1) =} }
main reactor Main { p = new P()  q = new P()  p.out -> q.inp  q.out -> p.inp after 0 }""",
    )
    # The delay instance's forwarding reaction (act -> out) is the root at this tag.
    delay = next(i for i in f.prog.instances if i.synthetic == "delay")
    assert level(f, delay.name, 0) == 0
    assert level(f, "Main.p") == 1 and level(f, "Main.q") == 2
    assert level(f, delay.name, 1) == 3


def test_causality_loop_reports_the_cycle_with_lines(tmp_path):
    errs = errors_of(
        tmp_path,
        """target Python
reactor P {
  input inp
  output out
  reaction(inp) -> out {= out.set(1) =}
}
main reactor Main {
  p = new P()
  q = new P()
  p.out -> q.inp
  q.out -> p.inp
}""",
    )
    assert len(errs) == 1
    msg = errs[0]
    assert msg.startswith(str(tmp_path / "Main.lf") + ":5:3: error: causality loop")
    assert "reaction 1 of Main.p (Main.lf:5)" in msg and "reaction 1 of Main.q (Main.lf:5)" in msg


def test_loop_through_reaction_order_is_reported(tmp_path):
    errs = errors_of(
        tmp_path,
        """target Python
reactor Echo { input inp  output out  reaction(inp) -> out {= out.set(inp.value) =} }
main reactor Main {
  e = new Echo()
  reaction(e.out) {= pass =}
  reaction(startup) -> e.inp {= e.inp.set(1) =}
}""",
    )
    assert len(errs) == 1 and "causality loop" in errs[0]
    assert (
        "reaction 1 of Main (Main.lf:5)" in errs[0] and "reaction 2 of Main (Main.lf:6)" in errs[0]
    )


def test_modes_break_cycles(tmp_path):
    f, rep = compile_text(
        tmp_path,
        """target Python
reactor M {
  input inp
  output out
  initial mode A { reaction(inp) -> out {= out.set(1) =} }
  mode B { reaction(inp) -> out {= out.set(2) =} }
}
main reactor Main { m = new M() }""",
    )
    assert f is not None and not rep.errors
