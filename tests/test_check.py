"""The validator: every rule reports `file.lf:LINE:COL: error: message` at the right place."""

import pytest
from lfsrc import compile_text, errors_of

HEAD = "target Python\n"

CASES = [
    # (program after the target line, message fragment, line, column)
    ("main reactor Main { input inp }", "main reactor cannot have inputs", 2, 21),
    ("reactor A(x) {}\nmain reactor Main {}", "needs a default value", 2, 11),
    ("reactor A(x: int = 1) {}\nmain reactor Main {}", "types are not allowed", 2, 11),
    ("main reactor Main { state s: int = 1 }", "types are not allowed", 2, 21),
    ("main reactor Main { state s(1) }", "initialise state with '='", 2, 21),
    ("main reactor Main { action a }", "must be declared 'logical' or 'physical'", 2, 21),
    ('main reactor Main { logical action a(0, 1 msec, "bogus") }', "unknown policy 'bogus'", 2, 21),
    ("main reactor Main { timer t(1 parsec) }", "invalid time unit 'parsec'", 2, 29),
    ("main reactor Main { timer t(100) }", "needs a time unit", 2, 29),
    ("main reactor Main { state s = None }", "'None' is not a parameter of reactor 'Main'", 2, 31),
    ("main reactor Main { state __x = 1 }", "must not start with '__'", 2, 21),
    ("reactor A { input in }\nmain reactor Main {}", "'in' is a reserved word", 2, 13),
    ("main reactor Main { timer t  timer t }", "'t' is already declared", 2, 30),
    ("main reactor Main { @bogus timer t }", "unknown attribute '@bogus'", 2, 21),
    (
        "main reactor Main { reaction(startup) -> nothing {= pass =} }",
        "'nothing' is not a port, action or timer",
        2,
        42,
    ),
    ("main reactor Main { x = new Missing() }", "reactor class 'Missing' is not defined", 2, 21),
    ("reactor A(p = 1) {}\nmain reactor Main { a = new A(q = 2) }", "has no parameter 'q'", 3, 31),
    (
        "reactor A { output out }\nmain reactor Main { a = new A()  reaction(a.nope) {= pass =} }",
        "'nope' is not a port of 'a'",
        3,
        43,
    ),
    (
        "reactor A { input inp  reaction(inp) {= pass =} }\nmain reactor Main { a = new A()  reaction(a.inp) {= pass =} }",
        "triggered by or read the input 'a.inp'",
        3,
        43,
    ),
    (
        "reactor A { output out  reaction(out) {= pass =} }\nmain reactor Main {}",
        "its own output 'out'",
        2,
        34,
    ),
    (
        "reactor A { input inp  reaction(startup) -> inp {= pass =} }\nmain reactor Main {}",
        "cannot write its own input",
        2,
        45,
    ),
    (
        "reactor A { output out }\nmain reactor Main { a = new A()  b = new A()  a.out -> b.out }",
        "cannot be the destination of a connection",
        3,
        56,
    ),
    (
        "reactor A { input inp  output out }\nmain reactor Main { a = new A()  b = new A()  a.out -> b.inp  a.out -> b.inp }",
        "written by more than one connection",
        3,
        72,
    ),
    (
        "reactor A { input inp  output out  reaction(startup) -> out {= pass =} }\n"
        "main reactor Main { a = new A()  b = new A()  a.out -> b.inp  reaction(startup) -> b.inp {= pass =} }",
        "both a connection and a reaction",
        3,
        84,
    ),
    ("reactor A { mode X {}  mode Y {} }\nmain reactor Main {}", "exactly one initial mode", 2, 13),
    ("main reactor Main { reaction(startup) }", "without a body are not supported", 2, 21),
    ("main reactor Main { watchdog w(10 msec) {= pass =} }", "watchdogs are not supported", 2, 21),
    (
        "main reactor Main { state s = {1, 2} }",
        "lists are not supported by the Python target",
        2,
        31,
    ),
    (
        "main reactor Main { reaction(startup) startup {= pass =} }",
        "both a trigger and a source",
        2,
        39,
    ),
    (
        "reactor A { initial mode X { reaction(startup) -> history(Nope) {= pass =} } }\n"
        "main reactor Main { a = new A() }",
        "'Nope' is not a mode of reactor 'A'",
        2,
        51,
    ),
    (
        "reactor A { input inp }\nmain reactor Main { a = new A()  b = new A()  a.nope -> b.inp }",
        "'nope' is not a port of reactor 'A'",
        3,
        47,
    ),
    ("main reactor Main { b.x -> b.y }", "'b' is not an instance in reactor 'Main'", 2, 21),
    ("main reactor Main { timer t(p) }", "'p' is not a parameter of this reactor", 2, 29),
    ("reactor A {}\nmain reactor Main { a = new[w] A() }", "'w' is not a parameter", 3, 29),
    (
        "reactor A(p = 1) {}\nmain reactor Main { a = new A(p = q) }",
        "'q' is not a parameter",
        3,
        35,
    ),
    ("main reactor Main { physical action a  reaction(startup) -> a {= pass =} }", None, 0, 0),
]


@pytest.mark.parametrize(
    "body,message,line,col", [c for c in CASES if c[1]], ids=[c[1] for c in CASES if c[1]]
)
def test_error_is_located(tmp_path, body, message, line, col):
    errs = errors_of(tmp_path, HEAD + body)
    hits = [e for e in errs if message in e]
    assert hits, f"expected an error containing {message!r}, got {errs}"
    head = hits[0].splitlines()[0]
    assert head.startswith(f"{tmp_path / 'Main.lf'}:{line}:{col}: error: "), head
    caret_line = hits[0].splitlines()[2]
    assert caret_line == " " * (col - 1) + "^"


def test_several_errors_are_reported_in_one_run(tmp_path):
    errs = errors_of(
        tmp_path, HEAD + "main reactor Main { timer t(1 parsec)  action a  state __s = 0 }"
    )
    assert len(errs) == 3


def test_main_name_must_match_the_file(tmp_path):
    errs = errors_of(tmp_path, HEAD + "main reactor Other {}", name="Main")
    assert any("must match the file name 'Main'" in e for e in errs)


def test_missing_target_is_an_error(tmp_path):
    errs = errors_of(tmp_path, "main reactor Main {}")
    assert any("missing target declaration" in e for e in errs)


def test_fast_with_physical_action_is_an_error(tmp_path):
    errs = errors_of(
        tmp_path,
        "target Python { fast: true }\nmain reactor Main { physical action a  reaction(a) {= pass =} }",
    )
    assert any("'fast: true' cannot be used" in e for e in errs)


def test_physical_action_turns_keepalive_on(tmp_path):
    f, rep = compile_text(
        tmp_path, HEAD + "main reactor Main { physical action a  reaction(a) {= pass =} }"
    )
    assert f.target.keepalive is True


def test_unknown_target_property_is_a_warning(tmp_path):
    f, rep = compile_text(tmp_path, "target Python { bogus: 1 }\nmain reactor Main {}")
    assert f is not None
    assert [d.message for d in rep.diagnostics] == ["unknown target property 'bogus'"]


def test_cyclic_instantiation_is_reported(tmp_path):
    errs = errors_of(
        tmp_path,
        HEAD
        + "reactor A { b = new B() }\nreactor B { a = new A() }\nmain reactor Main { a = new A() }",
    )
    assert any("cyclic instantiation: A -> B -> A" in e for e in errs)


def test_unused_import_is_a_warning(tmp_path):
    (tmp_path / "Lib.lf").write_text(HEAD + "reactor L {}\n")
    f, rep = compile_text(tmp_path, HEAD + 'import L from "Lib.lf"\nmain reactor Main {}')
    assert f is not None and any(d.message == "unused import 'L'" for d in rep.diagnostics)


def test_missing_import_file_is_located(tmp_path):
    errs = errors_of(tmp_path, HEAD + 'import L from "Nope.lf"\nmain reactor Main {}')
    assert any(
        e.startswith(f"{tmp_path / 'Main.lf'}:2:1: error: cannot find the imported file")
        for e in errs
    )


def test_names_are_resolved_in_classes_that_are_never_instantiated(tmp_path):
    errs = errors_of(
        tmp_path, HEAD + "reactor A { input inp  reaction(nope) {= pass =} }\nmain reactor Main {}"
    )
    assert any("'nope' is not a port, action or timer of reactor 'A'" in e for e in errs)


def test_an_instance_of_an_undefined_class_is_reported_once(tmp_path):
    errs = errors_of(tmp_path, HEAD + "main reactor Main { x = new Missing()  x.a -> x.b }")
    assert len(errs) == 1 and "reactor class 'Missing' is not defined" in errs[0]


def test_physical_connection_leaves_keepalive_off(tmp_path):
    f, rep = compile_text(
        tmp_path,
        HEAD
        + "reactor A { input inp  output out  reaction(startup) -> out {= out.set(1) =}\n"
        + "  reaction(inp) {= pass =} }\n"
        + "main reactor Main { a = new A()  b = new A()  a.out ~> b.inp }",
    )
    assert f.target.keepalive is False
    assert not rep.diagnostics


#: Bodies that bind or never use as a variable the names of their reactor's undeclared ports
#: and actions, or reach them as module globals: none is an error.
BODIES_THAT_BIND = """target Python
preamble {=
shared = 1
=}
reactor A {
  input x
  input y
  output out
  output other
  output shared
  output made_here
  output from_method
  logical action tick
  reaction(x) y -> out {=
    other = 3
    print(other, getattr(self, "out", None), shared)
    def f(tick):
      return tick
    out.set([x for x in range(3)] + [f(1)])
  =}
  reaction() {=
    print(x.value, y.value)
  =}
  reaction(startup) -> tick {=
    for other in range(2):
      pass
    try:
      pass
    except Exception as out:
      pass
    import math as x
    global made_here
    made_here = lambda y: y
    tick.schedule(0)
  =}
  reaction(tick) {=
    print(made_here(1), from_method)
  =}
  method m() {=
    global from_method
    from_method = 2
    return out
  =}
}
main reactor Main { a = new A() }
"""


def test_names_a_body_binds_itself_are_not_undeclared_uses(tmp_path):
    f, rep = compile_text(tmp_path, BODIES_THAT_BIND)
    assert f is not None and not rep.errors, [d.format() for d in rep.errors]


def test_a_port_named_like_a_builtin_is_fine_where_the_builtin_is_not_called(tmp_path):
    """LF's own Hierarchy test names an instance ``print``; a reaction that receives it and
    calls no print() is right."""
    text = HEAD + (
        "reactor P { input inp  output next  reaction(inp) -> next {= next.set(inp.value) =} }\n"
        "main reactor Main {\n  print = new P()\n"
        "  reaction(startup) -> print.inp {= print.inp.set(1) =}\n}\n"
    )
    f, rep = compile_text(tmp_path, text)
    assert f is not None and not rep.errors, [d.format() for d in rep.errors]
