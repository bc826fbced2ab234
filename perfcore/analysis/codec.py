"""Frozen dataclasses <-> the JSON their documents hold, by their type annotations: one reader and one writer
for every typed result. to_doc writes each field under its own name (enums by value, tuples as lists);
from_doc reads a document back into the class and checks every value against its annotation on the way, so
past it no code probes a dict: a value of the wrong kind is a BadDocument naming where (`verdict.step_ms is
text, not a number`). A key a class does not know is skipped (a later writer's addition); a missing key
takes the field's default, or is a BadDocument when the field has none.

Annotations understood: bool, int, float, str, None, X | None, tuple[X, ...], tuple[X, Y], dict[str, X],
Any (any JSON value), str enums, frozen dataclasses, and the constrained numbers Num (finite), Ms (a duration >= 0),
Frac (a share, 0..1) and Count (a whole number >= 0)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from typing import Annotated, Any, Callable

from perfcore.shapes import kind_of

__all__ = ["BadDocument", "to_doc", "from_doc", "fields_of", "Num", "Ms", "Frac", "Count"]


class BadDocument(ValueError):
    """A document that does not hold the result it claims to: where, and what is wrong there."""


class _Bound:
    """A number's constraint beside its type (Annotated[float, _Bound(...)])."""

    def __init__(self, name: str, low: float | None = None, high: float | None = None):
        self.name, self.low, self.high = name, low, high


Num = Annotated[float, _Bound("number")]  # any finite number
Ms = Annotated[float, _Bound("duration", low=0.0)]
Frac = Annotated[float, _Bound("fraction", low=0.0, high=1.0 + 1e-6)]
Count = Annotated[int, _Bound("count", low=0)]
_MAX_COUNT = 10**15  # more steps than a run could make in a century at a microsecond each


def to_doc(obj: Any) -> Any:
    """A typed value as JSON: a dataclass as an object of its fields, an enum as its value, a tuple as a list."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if hasattr(obj, "to_doc"):  # a class that keeps its document in another shape than its fields
            return obj.to_doc()
        return {f.name: to_doc(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (tuple, list)):
        return [to_doc(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_doc(v) for k, v in obj.items()}
    return obj


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def from_doc(cls: Any, value: Any, where: str = "") -> Any:
    """`value` (parsed JSON) read as `cls`, checked all the way down; BadDocument names the first problem."""
    return _read(cls, value, where)


def fields_of(cls: Any, value: Any, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The fields of dataclass `cls` (but those in `skip`) read from the object `value` by their annotations,
    each on its own: a missing key, or a value of the wrong kind, takes the field's default (every field has
    one). For an untrusted file that holds facts, each optional (a process's part, a folder's marker), where
    one damaged value must cost that value only; a result is read whole, by from_doc."""
    value = value if isinstance(value, dict) else {}
    hints, out = _hints(cls), {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        out[f.name] = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        if f.name in value:
            try:
                out[f.name] = _read(hints[f.name], value[f.name], f.name)
            except BadDocument:
                pass
    return out


def _at(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def _number(value: Any, where: str, bound: _Bound | None, integer: bool) -> Any:
    at = _where(where)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadDocument(f"{at} is {kind_of(value)}, not a number")
    whole = math.isfinite(value) and value == int(value)  # int() of an infinity raises
    if bound is not None and bound.name == "count" and not (whole and 0 <= value <= _MAX_COUNT):
        raise BadDocument(f"{at} is {value:g}, not a count")
    if integer and not whole:
        raise BadDocument(f"{at} is {value:g}, not a whole number")
    if bound is not None:
        if not math.isfinite(value):
            raise BadDocument(f"{at} is {value}, not a finite number")
        if bound.low is not None and value < bound.low:
            raise BadDocument(f"{at} is {value:g}, below zero")
        if bound.high is not None and value > bound.high:
            raise BadDocument(f"{at} is {value:g}, more than the whole")
    return int(value) if integer else float(value)


def _where(where: str) -> str:
    return where or "the document"


def _is(kind: type, said: str) -> Callable[[Any, str], Any]:
    """A reader of a plain JSON value of one kind (bool, str, null)."""

    def read(value: Any, where: str) -> Any:
        if not isinstance(value, kind):
            raise BadDocument(f"{_where(where)} is {kind_of(value)}, not {said}")
        return value

    return read


_PLAIN = {bool: _is(bool, "true/false"), str: _is(str, "text"), type(None): _is(type(None), "null")}


def _read(tp: Any, value: Any, where: str) -> Any:
    bound = None
    if typing.get_origin(tp) is Annotated:
        tp, *extra = typing.get_args(tp)
        bound = next((x for x in extra if isinstance(x, _Bound)), None)
    if tp is Any:
        return value
    if tp in _PLAIN:
        return _PLAIN[tp](value, where)
    if tp in (int, float):
        return _number(value, where, bound, integer=tp is int)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _read_union(typing.get_args(tp), value, where)
    if origin is tuple:
        return _read_tuple(typing.get_args(tp), value, where)
    if origin is dict:
        if not isinstance(value, dict):
            raise BadDocument(f"{_where(where)} is {kind_of(value)}, not an object")
        of = typing.get_args(tp)[1]
        return {str(k): _read(of, v, _at(where, k)) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise BadDocument(f"{_where(where)} is {str(value)[:40]!r}, not a known {tp.__name__}") from None
    if dataclasses.is_dataclass(tp):
        return _read_dataclass(tp, value, where)
    raise TypeError(f"codec: no reader for {tp!r}")


def _read_union(args: tuple[Any, ...], value: Any, where: str) -> Any:
    if value is None and type(None) in args:
        return None
    rest = [a for a in args if a is not type(None)]
    if set(rest) == {int, float}:  # a number either way: kept as the document wrote it (16 or 16.0)
        _number(value, where, None, integer=False)
        return value
    if len(rest) == 1:
        return _read(rest[0], value, where)
    for a in rest:  # several kinds allowed (a number or text): the first that reads it
        try:
            return _read(a, value, where)
        except BadDocument:
            continue
    raise BadDocument(f"{_where(where)} is {kind_of(value)}, not one of its kinds")


def _read_tuple(args: tuple[Any, ...], value: Any, where: str) -> tuple:
    if not isinstance(value, list):
        raise BadDocument(f"{_where(where)} is {kind_of(value)}, not a list")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_read(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if len(value) != len(args):
        raise BadDocument(f"{where} has {len(value)} values, not {len(args)}")
    return tuple(_read(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))


def _read_dataclass(tp: Any, value: Any, where: str) -> Any:
    if hasattr(tp, "from_doc"):  # a class that reads its own document shape
        return tp.from_doc(value, where)
    if not isinstance(value, dict):
        raise BadDocument(f"{_where(where)} is {kind_of(value)}, not an object")
    hints, kw, missing = _hints(tp), {}, []
    for f in dataclasses.fields(tp):
        if f.name in value:
            kw[f.name] = _read(hints[f.name], value[f.name], _at(where, f.name))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            missing.append(f.name)
    if missing:  # said after any value present but wrong: that one is what was damaged
        raise BadDocument(f"{_at(where, missing[0])} is missing")
    return tp(**kw)
