"""Checks of the numbers a user gives perfcore (CLI options, `%%perfcore` arguments): a finite number
in range, or a one-line UsageError that says which value, what is wrong and what would do."""

from __future__ import annotations

import math

from perfcore.errors import UsageError

__all__ = ["number", "duration", "MIN_INTERVAL_S", "MAX_COUNT"]

MIN_INTERVAL_S = 0.01  # below this the sampler would spend the core it is meant to watch
MAX_COUNT = 10**9


def number(
    value, name: str, *, kind: type = float, low: float | None = None, high: float | None = None, low_open: bool = False
) -> int | float:
    """`value` (text or a number) as `kind`, finite and within [low, high] (low excluded when low_open)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = str(value).strip()
        try:
            value = int(text, 10) if kind is int else float(text)
        except ValueError:
            raise UsageError(f"{name}: {str(value)[:40]!r} is not {'a whole number' if kind is int else 'a number'}")
    if not math.isfinite(value):
        raise UsageError(f"{name}: {value} is not a finite number")
    if kind is int and value != int(value):
        raise UsageError(f"{name}: {value} is not a whole number")
    if low is not None and (value < low or (low_open and value == low)):
        raise UsageError(f"{name}: must be {'>' if low_open else '>='} {low:g}, got {value:g}")
    if high is not None and value > high:
        raise UsageError(f"{name}: must be <= {high:g}, got {value:g}")
    return kind(value)


def duration(value, name: str, *, low: float = MIN_INTERVAL_S) -> float:
    """100ms, 0.5s or 1 (seconds) -> seconds, finite and at least `low`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
    else:
        t = str(value).strip().lower()
        scale = 1e-3 if t.endswith("ms") else 1.0
        try:
            v = float(t[:-2] if t.endswith("ms") else t[:-1] if t.endswith("s") else t) * scale
        except ValueError:
            raise UsageError(f"{name}: not a duration: {str(value)[:40]!r} (try 100ms or 0.5s)")
    if not math.isfinite(v) or v < low:
        raise UsageError(f"{name}: {value} is not a duration of at least {low * 1e3:.0f}ms")
    return v
