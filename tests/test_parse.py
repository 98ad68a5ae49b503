"""Unit tests of codegen.parse: every construct of spec §1 and located syntax errors."""

from __future__ import annotations

import pytest

from codegen.diagnostics import CompileError, Reporter
from codegen.lexing import code_body
from codegen.parse import parse, parse_file
from codegen.tree import (
    ActionDecl,
    Assignment,
    Attribute,
    AttrParam,
    BraceList,
    Code,
    Connection,
    Deadline,
    ImportedName,
    Instantiation,
    KeyValue,
    ListExpr,
    Literal,
    Method,
    MethodArg,
    Mode,
    ModeTransition,
    Parameter,
    ParamRef,
    PortDecl,
    Pos,
    Preamble,
    PropDict,
    PropIdent,
    PropList,
    Reaction,
    StateVar,
    Tardy,
    Time,
    TimerDecl,
    VarRef,
    Watchdog,
    Width,
    WidthOf,
)

F = "t.lf"


def P(line: int, col: int) -> Pos:
    return Pos(F, line, col)


def parse_ok(text: str):
    return parse(text, F, Reporter())


def members(body: str) -> tuple:
    """Members of a main reactor whose body starts on line 3, column 1."""
    return parse_ok(f"target Python\nmain reactor {{\n{body}\n}}\n").reactors[0].members


def member(body: str):
    (m,) = members(body)
    return m


def syntax_error(text: str):
    rep = Reporter()
    with pytest.raises(CompileError):
        parse(text, F, rep)
    (d,) = rep.errors
    return d


def ref(name, container=None, line=3, col=1, interleaved=False) -> VarRef:
    return VarRef(container, name, interleaved, P(line, col))


# --------------------------------------------------------------------------- target


def test_target_with_properties():
    m = parse_ok(
        "target Python {\n"
        "  fast: true, timeout: 10 msec, logging: DEBUG,\n"
        '  files: [include/hello.py, "a.py"], workers: 2,\n'
        '  tracing: {trace-file-name: "x"}, "single-threaded": false,\n'
        "}\nmain reactor {}\n"
    )
    t = m.target
    assert (t.name, t.pos) == ("Python", P(1, 1))
    props = {kv.key: kv.value for kv in t.properties}
    assert list(props) == [
        "fast",
        "timeout",
        "logging",
        "files",
        "workers",
        "tracing",
        "single-threaded",
    ]
    assert props["fast"] == Literal("true", P(2, 9))
    assert props["timeout"] == Time(10, "msec", P(2, 24))
    assert props["logging"] == PropIdent("DEBUG", P(2, 42))
    assert props["files"] == PropList(
        (PropIdent("include/hello.py", P(3, 11)), Literal('"a.py"', P(3, 29))), P(3, 10)
    )
    assert props["workers"] == Literal("2", P(3, 47))
    assert props["tracing"] == PropDict(
        (KeyValue("trace-file-name", Literal('"x"', P(4, 30)), P(4, 13)),), P(4, 12)
    )
    assert t.properties[0].pos == P(2, 3)


def test_target_forms():
    assert parse_ok("target Python;\nmain reactor {}").target.properties == ()
    assert parse_ok("target python {}\nreactor A {}").target.name == "python"
    assert parse_ok("main reactor {}").target is None
    m = parse_ok(
        "target Python { timeout: forever, cmake-args: {A: 1}, x: ../lib/y.py }\nmain reactor {}"
    )
    values = [kv.value for kv in m.target.properties]
    assert values[0] == Time(0, "forever", P(1, 26))
    assert values[1] == PropDict((KeyValue("A", Literal("1", P(1, 51)), P(1, 48)),), P(1, 47))
    assert values[2] == PropIdent("../lib/y.py", P(1, 58))


# --------------------------------------------------------------------------- imports, preambles


def test_imports():
    m = parse_ok(
        'target Python\nimport A, B as C from "lib/f.lf"\nimport D from <pkg/x.lf>;\n'
        "import E from <pkg>\nmain reactor {}"
    )
    i1, i2, i3 = m.imports
    assert i1.names == (ImportedName("A", None, P(2, 8)), ImportedName("B", "C", P(2, 11)))
    assert (i1.path, i1.package, i1.pos) == ("lib/f.lf", False, P(2, 1))
    assert (i2.path, i2.package) == ("pkg/x.lf", True)
    assert (i3.path, i3.package) == ("pkg", True)


def test_file_preambles():
    m = parse_ok(
        "target Python\npreamble {= import os =}\nprivate preamble {=\n  X = 1\n=}\n"
        "public preamble {= Y = 2 =}\nmain reactor {}"
    )
    p1, p2, p3 = m.preambles
    assert p1 == Preamble(Code("import os", P(2, 10), 2), None, P(2, 1))
    assert (p2.visibility, p2.code.text, p2.code.body_line) == ("private", "X = 1", 4)
    assert p2.pos == P(3, 1)
    assert p3.visibility == "public"


def test_file_order_is_enforced():
    d = syntax_error('target Python\nmain reactor {}\nimport A from "a.lf"\n')
    assert d.pos == P(3, 1)
    assert d.message.startswith("unexpected 'import', expected one of:")


# --------------------------------------------------------------------------- reactors


def test_reactor_header():
    m = parse_ok(
        'target Python\n@label("R")\nreactor Gen<T, U>(a = 1, b: int = 2, c) at host '
        "extends A, B {}\nfederated realtime reactor at user@10.0.0.1:8080 {}\n"
        "main reactor {}"
    )
    r, fed, main = m.reactors
    assert (r.name, r.main, r.federated, r.realtime) == ("Gen", False, False, False)
    assert r.pos == P(3, 1) and r.name_pos == P(3, 9)
    assert r.type_params == ("T", "U")
    assert r.parameters == (
        Parameter("a", Literal("1", P(3, 23)), None, (), P(3, 19)),
        Parameter("b", Literal("2", P(3, 35)), "int", (), P(3, 26)),
        Parameter("c", None, None, (), P(3, 38)),
    )
    assert r.host == "host"
    assert r.extends == (("A", P(3, 57)), ("B", P(3, 60)))
    assert r.attributes == (
        Attribute("label", (AttrParam(None, Literal('"R"', P(2, 8)), P(2, 8)),), P(2, 1)),
    )
    assert (fed.name, fed.federated, fed.realtime) == (None, True, True)
    assert fed.host == "user@10.0.0.1:8080"
    assert (main.name, main.main, main.name_pos, main.members) == (None, True, None, ())


def test_main_reactor_with_name_and_parameters():
    r = parse_ok("target Python\nmain reactor Foo(x = 0, y = 2 msec, z = [1, 2]) {}").reactors[0]
    assert (r.name, r.main, r.name_pos) == ("Foo", True, P(2, 14))
    assert [p.default for p in r.parameters] == [
        Literal("0", P(2, 22)),
        Time(2, "msec", P(2, 29)),
        ListExpr((Literal("1", P(2, 42)), Literal("2", P(2, 45))), P(2, 41)),
    ]


def test_parameter_attributes():
    r = parse_ok('target Python\nreactor A(@label("x") p = 1) {}').reactors[0]
    (p,) = r.parameters
    assert p.pos == P(2, 23) and p.attributes[0].name == "label"


# --------------------------------------------------------------------------- state


def test_state_forms():
    a, b, c, d, e, f = members(
        "state a = 0\nstate b\nreset state c = {= [] =}\n"
        "state d: int = 3\nstate e(1)\nstate f{1, 2}"
    )
    assert a == StateVar("a", Literal("0", P(3, 11)), False, None, (), P(3, 1))
    assert (b.init, b.init_style) == (None, "=")
    assert (c.reset, c.init, c.pos) == (True, Code("[]", P(5, 17), 5), P(5, 1))
    assert (d.type, d.init) == ("int", Literal("3", P(6, 16)))
    assert (e.init_style, e.init) == ("paren", Literal("1", P(7, 9)))
    assert (f.init_style, f.init) == (
        "brace",
        BraceList((Literal("1", P(8, 9)), Literal("2", P(8, 12))), "brace", P(8, 8)),
    )


def test_state_with_attribute_keeps_declaration_position():
    s = member('@label("x") state n = 1')
    assert s.pos == P(3, 13) and s.attributes == (
        Attribute("label", (AttrParam(None, Literal('"x"', P(3, 8)), P(3, 8)),), P(3, 1)),
    )


# --------------------------------------------------------------------------- ports and widths


def test_ports():
    i, m, o, t = members("input inp\nmutable input m\noutput[2] out\ninput x: int")
    assert i == PortDecl("input", "inp", None, False, None, (), P(3, 1))
    assert (m.mutable, m.kind, m.pos) == (True, "input", P(4, 1))
    assert (o.kind, o.width) == ("output", Width((Literal("2", P(5, 8)),), P(5, 7)))
    assert t.type == "int"


def test_width_forms():
    ps = members(
        "input[p] a\ninput[a + 2] b\ninput[] c\ninput[widthof(x)] d\n"
        "input[widthof(c.x)] e\noutput[{= 2 =}] f"
    )
    widths = [p.width.terms for p in ps]
    assert widths[0] == (ParamRef("p", P(3, 7)),)
    assert widths[1] == (ParamRef("a", P(4, 7)), Literal("2", P(4, 11)))
    assert widths[2] == ()
    assert widths[3] == (WidthOf("x", P(6, 7)),)
    assert widths[4] == (WidthOf("c.x", P(7, 7)),)
    assert widths[5] == (Code("2", P(8, 8), 8),)


# --------------------------------------------------------------------------- timers, actions


def test_timers():
    t1, t2, t3 = members("timer t\ntimer u(1 sec)\ntimer v(0, p)")
    assert t1 == TimerDecl("t", None, None, (), P(3, 1))
    assert (t2.offset, t2.period) == (Time(1, "sec", P(4, 9)), None)
    # In a time position a bare 0 is the time zero; other values are left to the checker.
    assert (t3.offset, t3.period) == (Time(0, None, P(5, 9)), ParamRef("p", P(5, 12)))
    assert member("timer w(5)").offset == Literal("5", P(3, 9))


def test_actions():
    a, b, c, d = members(
        'logical action a(10 msec, 2 msec, "drop")\nphysical action b\n'
        "action c\nlogical action d(0): int"
    )
    assert a == ActionDecl(
        "a",
        "logical",
        Time(10, "msec", P(3, 18)),
        Time(2, "msec", P(3, 27)),
        "drop",
        None,
        (),
        P(3, 1),
    )
    assert (b.origin, b.min_delay, b.min_spacing, b.policy) == ("physical", None, None, None)
    assert c.origin is None and c.pos == P(5, 1)
    assert (d.min_delay, d.type) == (Time(0, None, P(6, 18)), "int")


# --------------------------------------------------------------------------- reactions


def test_reaction_signature():
    r = member(
        "reaction(startup, shutdown, reset, t, inp, c.out) x, c.y -> out, c.inp, a {= pass =}"
    )
    assert r.triggers == (
        ref("startup", col=10),
        ref("shutdown", col=19),
        ref("reset", col=29),
        ref("t", col=36),
        ref("inp", col=39),
        ref("out", "c", col=44),
    )
    assert r.sources == (ref("x", col=51), ref("y", "c", col=54))
    assert r.effects == (ref("out", col=61), ref("inp", "c", col=66), ref("a", col=73))
    assert r.code == Code("pass", P(3, 75), 3)
    assert (r.name, r.deadline, r.tardy, r.is_mutation, r.pos) == (None, None, None, False, P(3, 1))


def test_mode_transitions_as_effects():
    r = member("reaction(t) -> reset(A), history(B), C {= =}")
    assert r.effects == (
        ModeTransition("A", "reset", P(3, 16)),
        ModeTransition("B", "history", P(3, 26)),
        ref("C", col=38),
    )


def test_named_mutation_bodiless_and_empty_triggers():
    a, b, c = members("reaction u3(x) {= =}\nmutation(x) -> y\nreaction() {= =}")
    assert a.name == "u3"
    assert (b.is_mutation, b.code, b.effects) == (True, None, (ref("y", line=4, col=16),))
    assert c.triggers == ()


def test_bodiless_reaction_before_next_member():
    a, b = members("reaction(t) -> out\nreaction(t) {= =};")
    assert a.code is None and b.code is not None


def test_deadline_and_tardy_handlers():
    r = member("reaction(x) {= a =} deadline(10 msec) {= b =}")
    assert r.deadline == Deadline(Time(10, "msec", P(3, 30)), Code("b", P(3, 39), 3), P(3, 21))
    stp, staa, tardy, bare = members(
        "reaction(x) {= =} STP(0) {= h =}\n"
        "reaction(x) {= =} STAA(5 ms) {= h =} deadline(p) {= d =}\n"
        "reaction(x) {= =} tardy {= h =}\nreaction(x) {= =} tardy"
    )
    assert stp.tardy == Tardy("STP", Time(0, None, P(3, 23)), Code("h", P(3, 26), 3), P(3, 19))
    assert (staa.tardy.keyword, staa.tardy.delay) == ("STAA", Time(5, "ms", P(4, 24)))
    assert staa.deadline.delay == ParamRef("p", P(4, 47))
    assert tardy.tardy == Tardy("tardy", None, Code("h", P(5, 25), 5), P(5, 19))
    assert bare.tardy == Tardy("tardy", None, None, P(6, 19))


def test_reaction_attributes():
    r = member('@label("hi")\nreaction(t) {= =}')
    assert r.pos == P(4, 1) and r.attributes[0].pos == P(3, 1)


# --------------------------------------------------------------------------- methods, watchdogs


def test_methods():
    a, b = members("const method f(a, b: int): int {= return a =}\nmethod g() {=\n  pass\n=}")
    assert a == Method(
        "f",
        (MethodArg("a", None, P(3, 16)), MethodArg("b", "int", P(3, 19))),
        "int",
        True,
        Code("return a", P(3, 32), 3),
        P(3, 1),
    )
    assert (b.const, b.args, b.code) == (False, (), Code("pass", P(4, 12), 5))


def test_watchdog():
    (w,) = members("watchdog w(10 ms) -> M, out {= x =}")
    assert w == Watchdog(
        "w",
        Time(10, "ms", P(3, 12)),
        (ref("M", col=22), ref("out", col=25)),
        Code("x", P(3, 29), 3),
        P(3, 1),
    )


# --------------------------------------------------------------------------- instances


def test_instantiations():
    a, b, c = members(
        "a = new A(p = 1, q = {= x =})\nb = new[N] B<int>() at user@host\n"
        "c = new[p + 1] C(x(1), y{2})"
    )
    assert a == Instantiation(
        "a",
        "A",
        None,
        (
            Assignment("p", Literal("1", P(3, 15)), P(3, 11)),
            Assignment("q", Code("x", P(3, 22), 3), P(3, 18)),
        ),
        (),
        None,
        (),
        P(3, 1),
    )
    assert (b.width, b.type_args, b.host) == (
        Width((ParamRef("N", P(4, 9)),), P(4, 8)),
        ("int",),
        "user@host",
    )
    assert c.width.terms == (ParamRef("p", P(5, 9)), Literal("1", P(5, 13)))
    assert [(x.name, x.style, x.value) for x in c.assignments] == [
        ("x", "paren", Literal("1", P(5, 20))),
        ("y", "brace", Literal("2", P(5, 26))),
    ]


def test_instantiation_attributes():
    i = member("@enclave(each = true, workers = 2) @transient\nx = new X()")
    assert [a.name for a in i.attributes] == ["enclave", "transient"]
    assert i.attributes[0].params == (
        AttrParam("each", Literal("true", P(3, 17)), P(3, 10)),
        AttrParam("workers", Literal("2", P(3, 33)), P(3, 23)),
    )
    assert i.attributes[1].params == ()
    assert i.pos == P(4, 1)


# --------------------------------------------------------------------------- connections


def test_connections():
    a, b, c, d = members(
        "a.out -> b.inp\nx, y.o -> z.i, w after 10 msec\n"
        "(a.out, b.out)+ -> c.inp\n"
        'interleaved(b.p) ~> c.q after 0 serializer "proto"'
    )
    assert a == Connection(
        (ref("out", "a"),), (ref("inp", "b", col=10),), False, False, None, None, (), P(3, 1)
    )
    assert b.lhs == (ref("x", line=4), ref("o", "y", line=4, col=4))
    assert b.rhs == (ref("i", "z", line=4, col=11), ref("w", line=4, col=16))
    assert b.delay == Time(10, "msec", P(4, 24))
    assert (c.iterated, c.pos) == (True, P(5, 1))
    assert c.lhs == (ref("out", "a", 5, 2), ref("out", "b", 5, 9))
    assert d.lhs == (VarRef("b", "p", True, P(6, 1)),)
    assert (d.physical, d.delay, d.serializer) == (True, Time(0, None, P(6, 31)), "proto")


def test_connection_attributes_and_parenthesised_list():
    c = member('@label("c") (a.x) -> b.y after d')
    assert (c.iterated, c.delay, c.pos) == (False, ParamRef("d", P(3, 32)), P(3, 13))
    assert c.attributes[0].name == "label"


# --------------------------------------------------------------------------- modes


def test_modes():
    a, b = members(
        "initial mode A {\n  reset state s = 0\n  timer t\n  logical action x\n"
        "  c = new C()\n  c.o -> c.i\n  reaction(reset) -> history(B) {= =}\n"
        "  watchdog w(1 s) {= =}\n}\nmode B { }"
    )
    assert (a.name, a.initial, a.pos) == ("A", True, P(3, 1))
    kinds = [type(m) for m in a.members]
    assert kinds == [StateVar, TimerDecl, ActionDecl, Instantiation, Connection, Reaction, Watchdog]
    assert a.members[5].triggers == (ref("reset", line=9, col=12),)
    assert b == Mode("B", False, (), P(12, 1))


# --------------------------------------------------------------------------- expressions


@pytest.mark.parametrize(
    "text",
    [
        "42",
        "-5",
        "1.5",
        ".5",
        "-.01e0",
        "6.02e+23",
        '"s"',
        '"""multi\nline"""',
        "'c'",
        "'\\n'",
        "True",
        "False",
        "true",
        "false",
    ],
)
def test_literals_are_kept_verbatim(text):
    assert member(f"state x = {text}").init == Literal(text, P(3, 11))


def test_time_values_and_other_expressions():
    s = members(
        "state a = 10 msec\nstate b = 2 weeks\nstate c = forever\nstate d = never\n"
        "state e = p\nstate f = [1 msec, p]\nstate g = {a, b}\nstate h = (1, 2)\n"
        "state i = []"
    )
    inits = [x.init for x in s]
    assert inits[0] == Time(10, "msec", P(3, 11))
    assert inits[1] == Time(2, "weeks", P(4, 11))  # any unit parses; the checker validates
    assert inits[2] == Time(0, "forever", P(5, 11))
    assert inits[3] == Time(0, "never", P(6, 11))
    assert inits[4] == ParamRef("p", P(7, 11))
    assert inits[5] == ListExpr((Time(1, "msec", P(8, 12)), ParamRef("p", P(8, 20))), P(8, 11))
    assert inits[6] == BraceList(
        (ParamRef("a", P(9, 12)), ParamRef("b", P(9, 15))), "brace", P(9, 11)
    )
    assert inits[7] == BraceList(
        (Literal("1", P(10, 12)), Literal("2", P(10, 15))), "paren", P(10, 11)
    )
    assert inits[8] == ListExpr((), P(11, 11))


def test_float_magnitude_is_a_syntax_error():
    d = syntax_error("target Python\nmain reactor {\n  timer t(1.5 sec)\n}")
    assert d.pos == P(3, 15) and d.message.startswith("unexpected 'sec'")


# --------------------------------------------------------------------------- names vs keywords


def test_unit_like_and_keyword_like_names():
    ms = members(
        "min = new Min(s = 1, h = 2)\ninput state\noutput reset\nstate ms = 0\n"
        "reaction(min.s, state) -> reset {= =}"
    )
    assert ms[0].name == "min" and [a.name for a in ms[0].assignments] == ["s", "h"]
    assert (ms[1].name, ms[2].name, ms[3].name) == ("state", "reset", "ms")
    assert ms[4].triggers == (ref("s", "min", 7, 10), ref("state", line=7, col=17))
    assert ms[4].effects == (ref("reset", line=7, col=27),)  # a port, not a transition


def test_time_unit_must_be_on_the_same_line():
    a, b = members("state x = 0\ns = new S()")
    assert a.init == Literal("0", P(3, 11)) and b.name == "s"
    c, d = members("a.x -> b.y after 0\nc.x -> d.y")
    assert c.delay == Time(0, None, P(3, 18)) and d.lhs == (ref("x", "c", line=4),)


def test_keyword_is_not_a_prefix_of_an_identifier():
    d = syntax_error("target Python\nmain reactor {\n  x = newX()\n}")
    assert d.pos == P(3, 7) and d.message == "unexpected 'newX', expected 'new'"


# --------------------------------------------------------------------------- code blocks


def test_code_block_close_inside_strings_and_comments():
    r = member("reaction(t) {=\n  print(\"=}\")  # =}\n  x = 1  // =}\n  y = '=}'\n=}")
    assert r.code.text == "print(\"=}\")  # =}\nx = 1  // =}\ny = '=}'"
    assert r.code.body_line == 4


def test_code_block_dedent_and_body_line():
    r = member("reaction(t) {=\n\n    if x:\n        y()\n\n    z()\n  =}")
    assert r.code == Code("if x:\n    y()\n\nz()", P(3, 13), 5)


def test_code_body_helper():
    assert code_body("{=  a + 1  =}", 7) == ("a + 1", 7)
    assert code_body("{= =}", 7) == ("", 7)
    assert code_body("{=\n   \n=}", 7) == ("", 7)
    assert code_body("{= first\n      second\n      third\n=}", 2) == ("first\nsecond\nthird", 2)
    assert code_body('{=\n\t"""doc"""\n\tpass\n=}', 1) == ('"""doc"""\npass', 2)


def test_triple_quoted_strings_inside_code():
    r = member("method f() {=\n  '''doc =} still doc'''\n  s = \"\"\"a =} b\"\"\"\n=}")
    assert r.code.text == "'''doc =} still doc'''\ns = \"\"\"a =} b\"\"\""


# --------------------------------------------------------------------------- comments, separators


def test_comments_and_optional_semicolons():
    m = parse_ok(
        "// line\n# hash\ntarget Python; /* block\n comment */\n'''\ndoc\n'''\n"
        "main reactor { state a = 1; state b = 2;; timer t # trailing\n}\n;"
    )
    assert [x.name for x in m.reactors[0].members] == ["a", "b", "t"]
    assert m.target.pos == P(3, 1)


def test_crlf_line_endings():
    m = parse_ok(
        "target Python\r\nmain reactor {\r\n  reaction(startup) {=\r\n    x = 1\r\n  =}\r\n}\r\n"
    )
    r = m.reactors[0].members[0]
    assert (r.pos, r.code.text, r.code.body_line) == (P(3, 3), "x = 1", 4)


def test_byte_order_mark_is_ignored():
    assert parse_ok("\ufefftarget Python\nmain reactor {}").target.pos == P(1, 1)


# --------------------------------------------------------------------------- errors


def test_error_missing_closing_brace():
    d = syntax_error("target Python\nmain reactor {\n  state x = 0\n")
    assert (d.pos, d.message) == (P(3, 14), "unexpected end of file, expected '}'")


def test_error_stray_token():
    d = syntax_error("target Python\nmain reactor {\n  state x = 0 }\n}\n")
    assert d.pos == P(4, 1)
    assert d.message == (
        "unexpected '}', expected one of: ';', '@', 'federated', 'main', "
        "'reactor', 'realtime', end of file"
    )


def test_error_unterminated_code_block():
    d = syntax_error("target Python\nmain reactor {\n  reaction(startup) {=\n    pass\n}\n")
    assert (d.pos, d.message) == (P(3, 21), "unterminated code block: '{=' has no matching '=}'")


def test_error_code_block_closed_only_inside_a_comment():
    d = syntax_error("target Python\nmain reactor {\n  state x = {= 1 # =}\n}\n")
    assert d.pos == P(3, 13) and "inside a comment" in d.message
    d = syntax_error("target Python\nmain reactor {\n  reaction(t) {=\n    f()  // =}\n}\n")
    assert d.pos == P(3, 15) and "inside a comment" in d.message
    d = syntax_error("target Python\nmain reactor {\n  reaction(t) {=\n}\n")
    assert "comment" not in d.message


def test_error_unterminated_string():
    d = syntax_error('target Python\nmain reactor {\n  state x = "abc\n}\n')
    assert (d.pos, d.message) == (P(3, 13), "unterminated string")


def test_error_unterminated_comment():
    d = syntax_error("target Python\n/* abc\nmain reactor {}\n")
    assert (d.pos, d.message) == (P(2, 1), "unterminated comment: '/*' has no matching '*/'")
    d = syntax_error("target Python\nmain reactor {}\n'''\n")
    assert d.pos == P(3, 1) and d.message.startswith("unterminated comment")


def test_error_bad_connection():
    d = syntax_error("target Python\nmain reactor {\n  a.out => b.inp\n}\n")
    assert (d.pos, d.message) == (P(3, 9), "unexpected '=', expected one of: ',', '->', '~>'")
    d = syntax_error("target Python\nmain reactor {\n  a.out -> \n}\n")
    assert d.pos == P(4, 1)
    assert d.message == "unexpected '}', expected one of: 'interleaved', identifier"


def test_error_unexpected_character():
    d = syntax_error("target Python\nmain reactor {\n  $x\n}\n")
    assert d.pos == P(3, 3) and d.message.startswith("unexpected character '$', expected one of:")


def test_error_attribute_on_method():
    d = syntax_error('target Python\nmain reactor {\n  @label("x") method f() {= =}\n}\n')
    # `method` is not a keyword where an attribute may be followed only by an attributable
    # member, so it reads as an instance name and the error is at the next token.
    assert d.pos == P(3, 22)
    assert d.message == "unexpected 'f', expected one of: ',', '->', '.', '=', '~>'"


def test_error_is_rendered_with_caret():
    rep = Reporter()
    with pytest.raises(CompileError):
        parse("target Python\nmain reactor {\n  timer t(0 1 sec)\n}\n", F, rep)
    assert rep.render() == (
        "t.lf:3:13: error: unexpected '1', expected one of: ')', ',', time unit\n"
        "  timer t(0 1 sec)\n"
        "            ^"
    )


def test_empty_file():
    d = syntax_error("")
    assert d.pos == P(1, 1) and d.message.startswith("unexpected end of file, expected one of:")


# --------------------------------------------------------------------------- files


def test_parse_file(tmp_path):
    path = tmp_path / "A.lf"
    path.write_text("target Python\nmain reactor A {}\n")
    rep = Reporter()
    m = parse_file(str(path), rep)
    assert (m.file, m.reactors[0].name, m.reactors[0].pos.file) == (str(path), "A", str(path))
    assert rep.sources[str(path)] == m.source


def test_parse_file_missing(tmp_path):
    rep = Reporter()
    with pytest.raises(CompileError):
        parse_file(str(tmp_path / "missing.lf"), rep)
    (d,) = rep.errors
    assert d.pos is None and d.message.startswith(f"cannot read '{tmp_path / 'missing.lf'}'")


# --------------------------------------------------------------------------- everything together

ALL = """\
target Python {
  timeout: 1 sec, fast: true, logging: debug, files: [include/hello.py],
  tracing: {trace-file-name: "t"},
}
import Lib, Other as O from "lib/Lib.lf"
import Pkg from <my-pkg/src/Pkg.lf>
private preamble {=
  import math
=}

@label("generic")
reactor Base<T>(width = 2, delay: time = 0) at localhost extends Lib, O {
  preamble {= CONST = 3 =}
  @side("west") mutable input[width] inp
  output[width + 1] out
  output[] any; input[widthof(inp)] w; input[{= 2 =}] c
  state s = {= [] =}; reset state r = 1; state p(1); state q{2}; state n
  timer tick(0, 10 msec)
  logical action a(delay, 1 msec, "replace")
  physical action ph
  action bare
  const method helper(x, y: int): int {= return x =}
  reaction name(startup, tick, inp) a -> out, a {=
    out.set(1)  # =} ignored
  =} STP(0) {= pass =} deadline(1 msec) {= pass =}
  mutation(shutdown) {= pass =}
  reaction(reset) -> out
  reaction(a) {= pass =} tardy
}

federated reactor Fed at 127.0.0.1 {
  b = new[2] Base<int>(width = 2, delay = 5 msec) at user@host:1234
  c = new Base(width(1), delay{0})
  (b.out)+ -> c.inp after 10 msec serializer "native"
  interleaved(b.out) ~> c.inp
}

main realtime reactor {
  x = new Base()
  initial mode One {
    timer t
    reaction(t) -> reset(Two), history(One), Two {= Two.set() =}
    watchdog dog(10 ms) -> Two {= pass =}
    y = new Base()
    y.out -> x.inp
  }
  mode Two {
    reset state k = 0
    reaction(reset) {= pass =}
  }
}
"""


def test_all_constructs_together():
    m = parse_ok(ALL)
    assert [i.path for i in m.imports] == ["lib/Lib.lf", "my-pkg/src/Pkg.lf"]
    assert m.preambles[0].visibility == "private"
    base, fed, main = m.reactors
    assert base.type_params == ("T",) and base.parameters[1].type == "time"
    kinds = [type(x).__name__ for x in base.members]
    assert kinds == [
        "Preamble",
        "PortDecl",
        "PortDecl",
        "PortDecl",
        "PortDecl",
        "PortDecl",
        "StateVar",
        "StateVar",
        "StateVar",
        "StateVar",
        "StateVar",
        "TimerDecl",
        "ActionDecl",
        "ActionDecl",
        "ActionDecl",
        "Method",
        "Reaction",
        "Reaction",
        "Reaction",
        "Reaction",
    ]
    r = base.of(Reaction)[0]
    assert r.code.text == "out.set(1)  # =} ignored" and r.tardy.keyword == "STP" and r.deadline
    assert base.of(Reaction)[2].code is None and base.of(Reaction)[3].tardy.code is None
    assert fed.federated and fed.host == "127.0.0.1"
    assert [type(x) for x in fed.members] == [Instantiation, Instantiation, Connection, Connection]
    assert main.realtime and main.main and [m.name for m in main.of(Mode)] == ["One", "Two"]


def test_no_exception_escapes_on_truncated_input():
    """Every prefix of a valid file either parses or fails with a CompileError."""
    for end in range(0, len(ALL), 7):
        rep = Reporter()
        try:
            parse(ALL[:end], F, rep)
        except CompileError:
            assert len(rep.errors) == 1 and rep.errors[0].pos is not None


def test_parse_large_file():
    """A 2,000-line file parses whole (its speed is measured by `make bench`, not here)."""
    unit = ALL.split("\n", 9)[9].replace("Base", "B{i}").replace("Fed", "F{i}")
    unit = unit.replace("federated reactor", "reactor")
    unit = unit.replace("main realtime reactor", "reactor M{i}")
    text = "target Python\n" + "".join(unit.replace("{i}", str(i)) for i in range(48))
    assert text.count("\n") >= 2000
    m = parse_ok(text)
    assert len(m.reactors) == 144
