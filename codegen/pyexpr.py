"""Python source text for LF expressions (spec §1.2, §1.13), and their LF text for users."""

from __future__ import annotations

from . import tree
from .units import is_time_unit, python_time


def python(expr: tree.Expr | None, ref: str | None) -> str:
    """Python text for ``expr``.

    ``ref`` is the object through which parameter references are read (``"self"`` inside
    state initialisers, ``"parent"`` in instantiation assignments); None where references are
    not allowed (the checker reports them). ``true``/``false`` become ``True``/``False``.
    """
    if expr is None:
        return "None"
    if isinstance(expr, tree.Literal):
        return {"true": "True", "false": "False"}.get(expr.text, expr.text)
    if isinstance(expr, tree.Time):
        if not is_time_unit(expr.unit):
            return "None"
        return python_time(expr.magnitude, expr.unit)
    if isinstance(expr, tree.ParamRef):
        return f"{ref}.{expr.name}" if ref else "None"
    if isinstance(expr, tree.Code):
        return f"({expr.text})"
    if isinstance(expr, tree.ListExpr):
        return "[" + ", ".join(python(e, ref) for e in expr.items) + "]"
    return "None"


def lf_text(expr: tree.Expr | None) -> str:
    """``expr`` as written in the ``.lf`` file, up to spacing (``100 msec``, ``{= f(x) =}``,
    ``[1, 2]``); "" for None."""
    if expr is None:
        return ""
    if isinstance(expr, tree.Literal):
        return expr.text
    if isinstance(expr, tree.Time):
        return f"{expr.magnitude} {expr.unit}" if expr.unit else str(expr.magnitude)
    if isinstance(expr, tree.ParamRef):
        return expr.name
    if isinstance(expr, tree.Code):
        return f"{{= {expr.text} =}}"
    brackets = {"paren": "()", "brace": "{}"}.get(getattr(expr, "kind", ""), "[]")
    open_, close = brackets[0], brackets[1]
    return open_ + ", ".join(lf_text(e) for e in expr.items) + close


def indent(text: str, spaces: int) -> str:
    """``text`` with every non-empty line indented by ``spaces``; ``pass`` for an empty body."""
    pad = " " * spaces
    # lines as Python counts them: a form feed or U+2028 inside a string literal ends none
    lines = text.split("\n") if text else ["pass"]
    if not any(line.strip() and not line.strip().startswith("#") for line in lines):
        lines = lines + ["pass"]
    return "\n".join(pad + line if line.strip() else "" for line in lines)
