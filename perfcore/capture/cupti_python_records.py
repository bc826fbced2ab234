"""cupti-python's record objects -> the columns the native tracer gives (csrc/cupti/activity_columns.h):
the same tables, names and dtypes, so parts from either backend concatenate. Records are read as the
bytes of their buffer, not attribute by attribute."""

from __future__ import annotations

import ctypes
from typing import Any, Iterable

import numpy as np

from perfcore.capture.cupti_python_kinds import Kinds

__all__ = ["SCHEMA", "records_to_columns"]

# Column -> dtype, per table; the same names and dtypes as the native decoder's tables
# (csrc/cupti/activity_columns.h), so parts from either backend concatenate.
_I64, _I32, _U8, _U16 = np.int64, np.int32, np.uint8, np.uint16
_SPAN = {"start_ns": _I64, "end_ns": _I64}
_ON_STREAM = {"device_id": _I32, "stream_id": _I32, "correlation_id": _I32}
SCHEMA: dict[str, dict[str, Any]] = {
    "kernels": {
        **_SPAN,
        **_ON_STREAM,
        "name_id": _I32,
        "grid_x": _I32,
        "grid_y": _I32,
        "grid_z": _I32,
        "block_x": _I32,
        "block_y": _I32,
        "block_z": _I32,
        "registers_per_thread": _I32,
        "static_shared_bytes": _I32,
        "dynamic_shared_bytes": _I32,
        "graph_id": _I32,
        "graph_node_id": _I64,
    },
    "memcpy": {
        **_SPAN,
        "size_bytes": _I64,
        **_ON_STREAM,
        "copy_kind": _U8,
        "src_kind": _U8,
        "dst_kind": _U8,
        "flags": _U8,
    },
    "memset": {**_SPAN, "size_bytes": _I64, **_ON_STREAM, "value": _I32, "memory_kind": _U16},
    "sync": {**_SPAN, "sync_type": _I32, "context_id": _I32, "stream_id": _I32, "correlation_id": _I32},
    "external_correlation": {"external_kind": _I32, "external_id": _I64, "correlation_id": _I32},
    "overhead": {**_SPAN, "overhead_kind": _I32, "object_kind": _I32},
    "api": {**_SPAN, "thread_id": _I64, "correlation_id": _I32, "cbid": _I32, "driver": _U8},
}
# The record attribute a column is read from, where the names differ (alike in every table; name_id
# and driver are made apart).
_FIELD = {
    "start_ns": "start",
    "end_ns": "end",
    "size_bytes": "bytes",
    "static_shared_bytes": "static_shared_memory",
    "dynamic_shared_bytes": "dynamic_shared_memory",
    "flags": "flags_",
    "sync_type": "type",
}
_TIMED = {t for t, cols in SCHEMA.items() if "start_ns" in cols}


def _gather(records: Iterable[Any], dtypes: dict) -> tuple[dict[Any, np.ndarray], int, int]:
    """Record objects -> one structured array per record class (the records' own bytes), the
    number of records, and how many were of classes perfcore does not read.

    Reading attributes costs microseconds each (cupti-python reads every field through numpy),
    so only each record's address is read, and the bytes are copied as arrays: records handed
    to one callback lie in one CUPTI buffer, so a single view of that span serves them all;
    records elsewhere (built by hand) are copied one by one.
    """
    addrs: dict[Any, list[int]] = {}
    n = other = 0
    for rec in records:
        n += 1
        cls = type(rec)
        if cls in dtypes:
            addrs.setdefault(cls, []).append(rec.ptr)
        else:
            other += 1
    out: dict[Any, np.ndarray] = {}
    if not addrs:
        return out, n, other
    lo = min(min(a) for a in addrs.values())
    hi = max(max(a) + dtypes[c].itemsize for c, a in addrs.items())
    packed = sum(len(a) * dtypes[c].itemsize for c, a in addrs.items())
    offs = {c: np.asarray(a, dtype=np.int64) - lo for c, a in addrs.items()}
    # CUPTI records are 8-byte aligned (ACTIVITY_RECORD_ALIGNMENT) and sized in 8-byte words.
    aligned = lo % 8 == 0 and all(not (o % 8).any() and dtypes[c].itemsize % 8 == 0 for c, o in offs.items())
    if hi - lo <= 2 * packed + 4096 and aligned:  # one buffer: one view over it, gathered in words
        words = np.frombuffer((ctypes.c_char * (hi - lo)).from_address(lo), dtype=np.uint64)
        for cls, off in offs.items():
            dt = dtypes[cls]
            out[cls] = np.ascontiguousarray(words[off[:, None] // 8 + np.arange(dt.itemsize // 8)]).view(dt).ravel()
    else:
        for cls, a in addrs.items():
            dt = dtypes[cls]
            arr = np.zeros(len(a), dtype=dt)
            base = arr.ctypes.data
            for i, p in enumerate(a):
                ctypes.memmove(base + i * dt.itemsize, p, dt.itemsize)
            out[cls] = arr
    return out, n, other


def records_to_columns(
    records: Iterable[Any], names: dict[str, int], kinds: Kinds, clock_offset_ns: int = 0
) -> dict[str, Any]:
    """cupti-python record objects -> the raw dict the native tracer returns (tables of numpy
    arrays, `names`, `records`, `other_records`, `invalid_timestamps`).

    `names` is the tracer's name table (name -> id), extended in place so ids stay stable across
    drains. Timestamps are moved onto the perfcore clock by subtracting clock_offset_ns. Records
    with a 0 timestamp or end < start are dropped and counted (CUPTI writes 0 when it could not
    collect a timestamp).
    """
    arrays, n, other = _gather(records, kinds.dtype)
    parts: dict[str, list[dict[str, np.ndarray]]] = {t: [] for t in SCHEMA}
    invalid = 0
    for arr in arrays.values():
        kind = arr["kind"].astype(np.int64)
        for k in np.unique(kind):
            table = kinds.table.get(int(k))
            sel = arr[kind == k]
            if table is None:
                other += len(sel)
                continue
            if table in _TIMED:
                start, end = sel["start"].astype(np.int64), sel["end"].astype(np.int64)
                ok = (start != 0) & (end != 0) & (end >= start)
                invalid += int((~ok).sum())
                sel = sel[ok]
            cols: dict[str, np.ndarray] = {}
            for col, dt in SCHEMA[table].items():
                if col == "name_id":
                    # Each distinct name pointer read once (they are stable within one buffer).
                    ptrs, inverse = np.unique(sel["name"].astype(np.int64), return_inverse=True)
                    text = [ctypes.string_at(p).decode(errors="replace") if p else "<unknown>" for p in ptrs.tolist()]
                    v = np.array([names.setdefault(t, len(names)) for t in text], dtype=dt)[inverse.reshape(-1)]
                elif col == "driver":
                    v = np.full(len(sel), int(k) == kinds.driver, dtype=dt)
                else:
                    v = sel[_FIELD.get(col, col)].astype(dt)
                    if col in ("start_ns", "end_ns"):
                        v = v - clock_offset_ns
                cols[col] = v
            parts[table].append(cols)
    raw: dict[str, Any] = {}
    for t, cols in SCHEMA.items():
        got = parts[t]
        raw[t] = {c: (np.concatenate([g[c] for g in got]) if got else np.empty(0, dtype=dt)) for c, dt in cols.items()}
    raw["names"] = list(names)  # insertion order = id order
    raw["records"], raw["other_records"], raw["invalid_timestamps"] = n, other, invalid
    return raw
