"""The JSON form of frozen dataclasses: a small, strict encoder and decoder driven by fields.

Rules: a dataclass is a JSON object with one key per field (the field's name, or the
``"json"`` entry of its metadata, see :func:`key`); a class with a ``KINDS`` class variable is
one case of a tagged union and carries ``"kind"`` (its first kind, unless it has a field of that
name); a :class:`~typing.NamedTuple` is a JSON array of its fields; a tuple ``tuple[T, ...]`` is
a JSON array; a :class:`~enum.StrEnum` is its value; ``int``, ``str``, ``bool`` and ``None``
are themselves.

Decoding checks everything (types, presence of every field but those marked :func:`added`, no
unknown key, known enum values and kinds) and raises :class:`Mismatch` naming the place of the
first problem (``reactors[3].ports[0].kind``). A decoder is made once per type and cached, so that reading a
large program costs little more than parsing its JSON.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from enum import StrEnum
from typing import Any

Decoder = Callable[[object], Any]
_SCALARS = {int: "an integer", str: "a string", bool: "true or false"}


class Mismatch(Exception):
    """A JSON value that does not fit its type; ``path`` says where (``a[3].b``)."""

    def __init__(self, expected: str, found: object):
        super().__init__(expected, found)
        self.expected = expected
        self.found = found
        self.parts: list[str] = []  # innermost first

    def within(self, part: str) -> Mismatch:
        """Record that the value was at ``part`` (``.name`` or ``[i]``) of its container."""
        self.parts.append(part)
        return self

    @property
    def path(self) -> str:
        return "".join(reversed(self.parts)).lstrip(".")

    def __str__(self) -> str:
        found = repr(self.found)
        found = found if len(found) <= 60 else found[:57] + "..."
        return f"{self.path or 'top level'}: expected {self.expected}, found {found}"


def key(name: str) -> dict[str, str]:
    """Field metadata giving the field the JSON key ``name`` (for keywords, clearer names)."""
    return {"json": name}


def added() -> dict[str, bool]:
    """Field metadata of a field added to the format after files were written without it:
    a missing key decodes to the field's default (the field must have one)."""
    return {"added": True}


def _json_key(f: dataclasses.Field) -> str:
    return f.metadata.get("json", f.name)


def encode(value: Any) -> Any:
    """The JSON value (dicts, lists, scalars) of a dataclass, record, tuple, enum or scalar."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind not in _ENCODERS:
        _ENCODERS[kind] = _encoder(kind)
    return _ENCODERS[kind](value)


_PLAIN = {int, str, bool, type(None)}
_ENCODERS: dict[type, Callable[[Any], Any]] = {}


def _encoder(kind: type) -> Callable[[Any], Any]:
    if dataclasses.is_dataclass(kind):
        fields = [(_json_key(f), f.name) for f in dataclasses.fields(kind)]
        tags = getattr(kind, "KINDS", None)
        tag = {} if tags is None or "kind" in dict(fields) else {"kind": tags[0]}
        return lambda v: {**tag, **{k: encode(getattr(v, name)) for k, name in fields}}
    if issubclass(kind, StrEnum):
        return lambda v: v.value
    if issubclass(kind, tuple):
        return lambda v: [encode(x) for x in v]
    raise TypeError(f"no JSON form for {kind.__name__}")


def decode(tp: Any, value: object, where: str = "") -> Any:
    """``value`` (parsed JSON) decoded as type ``tp``; ``where`` prefixes error paths.

    Raises:
        Mismatch: the value does not fit ``tp``.
    """
    try:
        return decoder(tp)(value)
    except Mismatch as e:
        raise (e.within(where) if where else e) from None


_DECODERS: dict[Any, Decoder] = {}


def decoder(tp: Any) -> Decoder:
    """The (cached) function that decodes a JSON value as type ``tp``."""
    if tp not in _DECODERS:
        _DECODERS[tp] = _make(tp)
    return _DECODERS[tp]


def _make(tp: Any) -> Decoder:
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        return _union(typing.get_args(tp))
    if origin is tuple:
        item = typing.get_args(tp)[0]
        return _list(decoder(item), item if item in _SCALARS else None)
    if dataclasses.is_dataclass(tp):
        return _object(tp)
    if isinstance(tp, type) and issubclass(tp, StrEnum):
        return _enum(tp)
    if isinstance(tp, type) and issubclass(tp, tuple):  # a NamedTuple record
        return _record(tp)
    return _scalar(tp)


def _scalar(tp: type) -> Decoder:
    expected = _SCALARS[tp]

    def scalar(v: object) -> Any:
        if type(v) is not tp:  # exact: a bool is not an int here
            raise Mismatch(expected, v)
        return v

    return scalar


def _enum(tp: type[StrEnum]) -> Decoder:
    members = {m.value: m for m in tp}
    expected = "one of " + ", ".join(map(repr, members))

    def enum(v: object) -> Any:
        if type(v) is not str or v not in members:
            raise Mismatch(expected, v)
        return members[v]

    return enum


def _items(item: Decoder, v: list) -> list:
    out = []
    for i, x in enumerate(v):
        try:
            out.append(item(x))
        except Mismatch as e:
            raise e.within(f"[{i}]") from None
    return out


def _list(item: Decoder, plain: type | None) -> Decoder:
    def items(v: object) -> tuple:
        if type(v) is not list:
            raise Mismatch("a list", v)
        if plain is not None and all(type(x) is plain for x in v):
            return tuple(v)  # a list of scalars that are all right: nothing to convert
        return tuple(_items(item, v))

    return items


def _record(tp: Any) -> Decoder:
    hints = typing.get_type_hints(tp)
    fields = [decoder(hints[n]) for n in tp._fields]
    expected = "[" + ", ".join(tp._fields) + "]"

    def record(v: object) -> Any:
        if type(v) is not list or len(v) != len(fields):
            raise Mismatch(expected, v)
        out = []
        for i, (f, x) in enumerate(zip(fields, v)):
            try:
                out.append(f(x))
            except Mismatch as e:
                raise e.within(f"[{i}]") from None
        return tp(*out)

    return record


def _union(options: tuple) -> Decoder:
    rest = [o for o in options if o is not type(None)]
    if len(rest) == 1:  # X | None
        inner = decoder(rest[0])
        return lambda v: None if v is None else inner(v)
    by_kind = {k: decoder(cls) for cls in rest for k in cls.KINDS}
    expected = "one of " + ", ".join(map(repr, by_kind))

    def tagged(v: object) -> Any:
        kind = v.get("kind") if type(v) is dict else None
        if type(kind) is not str or kind not in by_kind:
            raise Mismatch(expected, kind).within(".kind")
        return by_kind[kind](v)

    return tagged


def _object(cls: Any) -> Decoder:
    hints = typing.get_type_hints(cls)
    fields = [(_json_key(f), f.name, decoder(hints[f.name])) for f in dataclasses.fields(cls)]
    known = {k for k, _, _ in fields} | ({"kind"} if hasattr(cls, "KINDS") else set())
    optional = {_json_key(f) for f in dataclasses.fields(cls) if f.metadata.get("added")}

    def obj(v: object) -> Any:
        if type(v) is not dict:
            raise Mismatch("an object", v)
        args = {}
        for k, name, field_decoder in fields:
            if k not in v:
                if k in optional:
                    continue  # the dataclass's default
                raise Mismatch("a value (the field is missing)", None).within("." + k)
            try:
                args[name] = field_decoder(v[k])
            except Mismatch as e:
                raise e.within("." + k) from None
        if not known.issuperset(v):
            extra = ", ".join(sorted(map(repr, set(v) - known)))
            raise Mismatch("no field " + extra, v)
        return cls(**args)

    return obj
