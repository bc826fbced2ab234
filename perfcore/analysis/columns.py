"""Tables as plain columns (a dict of equal-length numpy arrays): what the training process settles
with, so that it never imports pandas (~0.3-2.5 s on the training thread, the first time)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

__all__ = ["Cols", "as_cols", "nrows", "take", "concat", "empty", "frame", "sorted_unique"]

Cols = dict[str, np.ndarray]


def as_cols(table: Any) -> Cols:
    """A DataFrame or a mapping of array-likes -> Cols (no copy where numpy allows)."""
    return {str(c): np.asarray(table[c]) for c in table}


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """np.unique(x) for the nearly sorted int64 columns settling makes (interval boundaries, phase ids):
    numpy 2.3+ answers np.unique with a hash pass then a sort, ~150x a stable sort's time here (timsort
    runs through a nearly sorted column at about a pass's cost), and settling paid it per row."""
    s = np.sort(np.asarray(x), kind="stable")
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def nrows(cols: Mapping[str, np.ndarray]) -> int:
    return len(next(iter(cols.values()))) if cols else 0


def take(cols: Cols, sel: np.ndarray) -> Cols:
    """The rows a boolean mask (or an index array) selects."""
    return {c: a[sel] for c, a in cols.items()}


def empty(dtypes: Mapping[str, Any]) -> Cols:
    return {c: np.zeros(0, dtype=t) for c, t in dtypes.items()}


def concat(parts: list[Cols], dtypes: Mapping[str, Any]) -> Cols:
    """Rows of the parts, one after another (dtypes: the columns of no rows at all)."""
    parts = [p for p in parts if nrows(p)]
    if not parts:
        return empty(dtypes)
    if len(parts) == 1:
        return parts[0]
    return {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}


def frame(cols: Cols):
    """Cols -> a pandas DataFrame, for the readers that want one (the parent, a finished run). The
    frame takes the arrays as they are (pandas would copy them into one block: the whole table twice
    at once); callers hand over arrays made for it."""
    import pandas as pd

    return pd.DataFrame(cols, copy=False)
