"""The shape language the reader checks documents with: NUM / INT / STR / ANY, MS (a duration >= 0),
FRAC (a share, 0..1), {key: shape} (all keys required), [shape] (a list of), Map(shape) (str -> shape),
Keys({...}) (every key optional), Opt(shape) (None allowed), Some(shape) (an empty container allowed),
Absent(shape) (a required-dict key that may be missing). problem() says in words where a value breaks its
shape; nothing here knows a perfcore document."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["Map", "Keys", "Opt", "Some", "Absent", "NUM", "INT", "STR", "ANY", "MS", "FRAC", "problem", "kind_of"]


class _Shape:
    def __init__(self, of):
        self.of = of


class Map(_Shape):
    pass


class Keys(dict):
    """{key: shape} where every key may be absent, but one that is present must have its shape."""


class Opt(_Shape):
    pass


class Some(_Shape):
    pass


class Absent(_Shape):
    """In a {key: shape} of required keys, one that may be missing (a field later writers added)."""


NUM, INT, STR, ANY = "number", "count", "text", "any"
MS, FRAC = "duration", "fraction"  # a number >= 0; a share, 0..1
_MAX_COUNT = 10**15  # more steps than a run could make in a century at a microsecond each


def problem(v: Any, shape: Any, where: str) -> str | None:  # noqa: C901, PLR0912
    """None when `v` has `shape`, else one phrase naming where it breaks it (`where`: the path so far)."""
    if shape is ANY:
        return None
    if isinstance(shape, Absent):
        return problem(v, shape.of, where)
    if isinstance(shape, Opt):
        return None if v is None else problem(v, shape.of, where)
    if isinstance(shape, Some):
        return None if v in ({}, [], None) else problem(v, shape.of, where)
    if shape in (NUM, INT, MS, FRAC):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{where} is {kind_of(v)}, not a number"
        if not math.isfinite(v):
            return f"{where} is {v}, not a finite number"
        if shape is INT and (v < 0 or v != int(v) or v > _MAX_COUNT):
            return f"{where} is {v:g}, not a count"
        if shape in (MS, FRAC) and v < 0:
            return f"{where} is {v:g}, below zero"
        if shape is FRAC and v > 1 + 1e-6:
            return f"{where} is {v:g}, more than the whole"
        return None
    if shape is STR:
        return None if isinstance(v, str) else f"{where} is {kind_of(v)}, not text"
    if isinstance(shape, (dict, Map)) and not isinstance(v, dict):
        return f"{where} is {kind_of(v)}, not an object"
    if isinstance(shape, dict):
        for k, s in shape.items():
            if k not in v and (isinstance(shape, Keys) or isinstance(s, Absent)):
                continue
            if k not in v:
                return f"{where}.{k} is missing"
            p = problem(v[k], s, f"{where}.{k}")
            if p:
                return p
        return None
    if isinstance(shape, Map):
        return next(filter(None, (problem(x, shape.of, f"{where}.{k}") for k, x in v.items())), None)
    if isinstance(shape, list):
        if not isinstance(v, list):
            return f"{where} is {kind_of(v)}, not a list"
        return next(filter(None, (problem(x, shape[0], f"{where}[{i}]") for i, x in enumerate(v))), None)
    raise TypeError(shape)


def kind_of(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(v), f"{v!r}"[:20]
    )
