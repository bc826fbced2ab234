"""Columnar tables (pandas) of what a run recorded: spans, kernels, memcpys, samples.

Native code hands over dicts of numpy arrays; this module names and types them once.
Strings are interned: kernel names arrive as integer ids plus one table of names, and become a
pandas Categorical (codes + categories), never one Python string per row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfcore._lazy import lazy_module

pd = lazy_module("pandas")  # imported on first use: settling needs it, recording does not

__all__ = [
    "MEMCPY_KINDS",
    "MEMORY_KINDS",
    "ACTIVITY_KINDS",
    "TRANSFER_COPY_KINDS",
    "HOST_DESTINATION_COPY_KINDS",
    "activity_frames",
    "merge_activity",
]

# CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind values (cupti_activity.h).
MEMCPY_KINDS = dict(enumerate(("unknown", "h2d", "d2h", "h2a", "a2h", "a2a", "a2d", "d2a", "d2d", "h2h", "p2p")))
MEMORY_KINDS = dict(
    enumerate(("unknown", "pageable", "pinned", "device", "array", "managed", "device_static", "managed_static"))
)

# Copies between host and device memory: what `transfer` means. Device-to-device, array and
# peer copies run on the device without the host link, and memsets write device memory: those are
# device work (compute), not transfer. Host-to-host copies (9) involve no device at all.
TRANSFER_COPY_KINDS = (1, 2, 3, 4)  # h2d, d2h, h2a, a2h
HOST_DESTINATION_COPY_KINDS = (2, 4)  # d2h, a2h: the host memory is the destination

# The record tables every backend hands over, in this order.
ACTIVITY_KINDS = ("kernels", "memcpy", "memset", "sync", "external_correlation", "overhead", "api")


def merge_activity(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several drains' raw columns -> one raw dict. Each part carries the whole name table so far
    (ids are global to the tracer), so the last part's names decode every part."""
    merged: dict[str, Any] = {"names": parts[-1]["names"] if parts else []}
    for kind in ACTIVITY_KINDS:
        cols = [p[kind] for p in parts if p.get(kind)]
        merged[kind] = {c: np.concatenate([p[c] for p in cols]) for c in cols[0]} if cols else {}
    for count in ("records", "other_records", "invalid_timestamps", "zero_timestamps"):
        merged[count] = sum(int(p.get(count, 0)) for p in parts)
    return merged


def activity_frames(raw: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """CUPTI columns from the native tracer -> one DataFrame per record kind.

    kernels gain `name` (categorical) and `duration_ns`; memcpy gains `direction`, `src`, `dst`
    (categoricals) and `pageable` (host side of the copy is pageable memory).
    """
    names = list(raw.get("names", []))
    frames: dict[str, pd.DataFrame] = {}
    for kind in ACTIVITY_KINDS:
        frames[kind] = pd.DataFrame(raw.get(kind, {}))
    k = frames["kernels"]
    if len(k.columns):
        cats = pd.Index(names, dtype=object)
        codes = k["name_id"].to_numpy()
        # Interned names are unique unless two mangled names demangle alike; then fall back to labels.
        k["name"] = (
            pd.Categorical.from_codes(codes, categories=cats)
            if cats.is_unique
            else pd.Categorical(np.asarray(names, dtype=object)[codes])
        )
        k["duration_ns"] = k["end_ns"] - k["start_ns"]
    m = frames["memcpy"]
    if len(m.columns):
        copy_kind, src, dst = (m[c].to_numpy() for c in ("copy_kind", "src_kind", "dst_kind"))
        m["direction"] = _lookup(copy_kind, MEMCPY_KINDS)
        m["src"] = _lookup(src, MEMORY_KINDS)
        m["dst"] = _lookup(dst, MEMORY_KINDS)
        # The host is the destination of device-to-host (2) and array-to-host (4) copies, the
        # source of every other transfer kind.
        m["pageable"] = np.where(np.isin(copy_kind, HOST_DESTINATION_COPY_KINDS), dst, src) == 1
        m["transfer"] = np.isin(copy_kind, TRANSFER_COPY_KINDS)
        m["duration_ns"] = m["end_ns"] - m["start_ns"]
    return frames


def _lookup(codes: np.ndarray, mapping: dict[int, str]) -> pd.Categorical:
    """Vectorised code -> label for small enums (no per-row Python)."""
    top = max(mapping) + 1
    labels = np.array([mapping.get(i, "unknown") for i in range(top)] + ["unknown"], dtype=object)
    idx = np.where((codes >= 0) & (codes < top), codes, top).astype(np.int64)
    cats = list(dict.fromkeys(labels))
    return pd.Categorical(labels[idx], categories=cats)
