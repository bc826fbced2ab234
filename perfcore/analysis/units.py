"""Numbers in words: a duration, a share or a ratio printed with the unit and precision its size
needs, so a 0.15 ms step reads "150 us", never "0.1 ms", and nothing real reads "0 ms". Every text
the analysis, the terminal and the experiments print goes through these."""

from __future__ import annotations

import math

__all__ = ["fmt_ms", "fmt_share", "fmt_x", "fmt_band", "WIDTH"]

WIDTH = 100  # the columns of the short report: every line the terminal prints is fitted to them

MICRO = "\u00b5"


def _sig3(v: float) -> str:
    """Three significant figures, no exponent, no trailing zeros beyond what is significant."""
    a = abs(v)
    if a >= 99.95:
        return f"{v:.0f}"
    if a >= 9.995:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_ms(ms: float | None) -> str:
    """A duration given in ms: ns below 1 us, us below 1 ms, ms below 1 s, s from there; three
    significant figures; exactly zero is "0 ms"; None or NaN is "n/a"."""
    if ms is None:
        return "n/a"
    ms = float(ms)
    if ms != ms or math.isinf(ms):
        return "n/a"
    if ms == 0:
        return "0 ms"
    a = abs(ms)
    if a < 1e-3:
        return f"{ms * 1e6:.0f} ns"
    if a < 1.0:
        return f"{_sig3(ms * 1e3)} {MICRO}s"
    if a < 1e3:
        return f"{_sig3(ms)} ms"
    return f"{_sig3(ms / 1e3)} s"


def fmt_share(fraction: float | None) -> str:
    """A fraction as a percentage: whole percent from 10%, one decimal below it, "<0.1%" for a
    share too small to print but not zero."""
    if fraction is None or fraction != fraction:
        return "n/a"
    p = 100.0 * float(fraction)
    if p == 0:
        return "0%"
    if abs(p) >= 9.95:
        return f"{p:.0f}%"
    if abs(p) < 0.05:
        return "<0.1%" if p > 0 else ">-0.1%"
    return f"{p:.1f}%"


def fmt_x(ratio: float | None) -> str:
    """A speed ratio: "1.18x"; None (nothing left of the step, no finite ratio) is "n/a"."""
    if ratio is None or ratio != ratio or math.isinf(ratio):
        return "n/a"
    return f"{ratio:.2f}x"


def fmt_band(lo: float | None, hi: float | None, fmt=fmt_x) -> str:
    """An interval in the unit of `fmt`: "1.70-1.95x", or "" when either end is unknown."""
    if lo is None or hi is None or lo != lo or hi != hi:
        return ""
    a, b = fmt(lo), fmt(hi)
    if a == b:
        return a
    # One unit at the end when both ends print the same one ("1.70-1.95x", "8.1-12%").
    for unit in ("x", "%", f" {MICRO}s", " ms", " ns", " s"):
        if a.endswith(unit) and b.endswith(unit):
            return f"{a[: -len(unit)]}-{b}"
    return f"{a} to {b}"
