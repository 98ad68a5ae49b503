"""Building programs from their model: channel roots, capsules, errors, source maps."""

import pytest
from runtime_fixtures.graphkit import Kit

from reactors.api import ReactorBase
from reactors.core.errors import GraphError, SourceMap
from reactors.core.port import Multiport
from reactors.model.build import build


class Empty(ReactorBase):
    pass


class Any(ReactorBase):
    def reaction_function_0(self, *ports):
        pass


def test_zero_delay_channels_share_the_root_port():
    k = Kit()
    main = k.add("Main", Empty, ports=["inp"])
    a = k.add("a", Any, parent=main, ports=[("out", 2)])
    b = k.add("b", Any, parent=main, ports=["inp"])
    c = k.add("c", Empty, parent=main, ports=["inp"])
    d = k.add("d", Any, parent=c, ports=["inp"])
    k.connect(a, "out", b, "inp")
    k.connect(a, "out", c, "inp", src_ch=1)
    k.connect(c, "inp", d, "inp")  # pass-through hop
    k.reaction(b, [("port", b, "inp")])
    k.reaction(d, [("port", d, "inp")])
    k.reaction(a, ["startup"], effects=[("port", a, "out")])
    p = build(k.module, k.program())
    ra, rb, rd = (
        next(r for r in p.reactions if r.owner == n) for n in ("Main.a", "Main.b", "Main.c.d")
    )
    out = ra.args[0]
    assert isinstance(out, Multiport) and len(out) == 2
    assert rb.args[0] is out[0] and rd.args[0] is out[1]
    assert out[0]._triggers == (rb.rank,) and out[1]._triggers == (rd.rank,)
    assert ra.rank < rb.rank and ra.rank < rd.rank


def test_graph_errors():
    k = Kit()
    m = k.add("Main", Empty)
    k.reaction(m, ["startup"])
    with pytest.raises(GraphError, match="no method"):
        build(k.module, k.program())


def test_state_init_failure_is_reported(capsys):
    class Bad(ReactorBase):
        def _lf_init_state(self):
            raise ValueError("bad init")

    k = Kit()
    k.add("Main", Bad)
    assert k.run() == 1
    err = capsys.readouterr().err
    assert "instantiating Main" in err and "ValueError: bad init" in err


def test_error_in_reset_state_is_reported(capsys):
    class R(ReactorBase):
        def _lf_reset_state(self, mode):
            raise KeyError("oops")

        def reaction_function_0(self, B):
            B.set()

    k = Kit()
    m = k.add("Main", R, modes=["A", "B"])
    k.reaction(m, ["startup"], effects=[("mode", "B", "reset")], mode="A")
    assert k.run() == 1
    assert "KeyError: 'oops'" in capsys.readouterr().err


def test_source_map_translates_module_lines(tmp_path):
    mod = tmp_path / "M.py"
    mod.write_text("x\n")
    sm = SourceMap(str(mod), [[10, 12, "/a/M.lf", 100], [20, 20, "/a/N.lf", 5]])
    assert sm.translate(str(mod), 11) == ("/a/M.lf", 101)
    assert sm.translate(str(mod), 20) == ("/a/N.lf", 5)
    assert sm.translate(str(mod), 15) == (str(mod), 15)
    assert sm.translate("/elsewhere.py", 11) == ("/elsewhere.py", 11)
