"""The native CUPTI backend: a thin Python face on perfcore._C's activity tracer."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from perfcore._native import require_cupti
from perfcore.errors import UsageError
from perfcore.capture.columns import activity_frames

__all__ = ["CuptiTracer"]

class CuptiTracer:
    """Traces kernels, memcpys, memsets, syncs and CUPTI's own overhead on the perfcore clock.

    with CuptiTracer() as t:
        ...                      # GPU work
    frames = t.frames            # {"kernels": DataFrame, "memcpy": DataFrame, ...}

    CUPTI is process-wide: one tracer at a time. Records are decoded on the calling thread in
    collect()/stop(), never in CUPTI's callbacks.
    """

    def __init__(self, buffer_bytes: int = 8 << 20, max_buffers: int = 64):
        self.buffer_bytes = int(buffer_bytes)
        self.max_buffers = int(max_buffers)
        self._C = None
        self._parts: list[dict[str, Any]] = []
        self.frames: dict[str, pd.DataFrame] | None = None
        self.stats: dict[str, Any] = {}

    def start(self) -> "CuptiTracer":
        self._C = require_cupti("kernel tracing")
        self._C.cupti_start(self.buffer_bytes, self.max_buffers)
        return self

    def collect(self) -> None:
        """Flush what CUPTI has so far into this tracer (bounded memory for long runs)."""
        if self._C is None:
            raise UsageError("CuptiTracer.collect() before start()")
        self._parts.append(self._C.cupti_collect())

    def take(self) -> dict[str, pd.DataFrame]:
        """What was traced since the last take(), as frames; tracing goes on."""
        if self._C is not None and self._C.cupti_active():
            self.collect()
        self.stats = dict(self._C.cupti_stats()) if self._C is not None else {}
        frames, self._parts = _merge(self._parts), []
        return frames

    def stop(self) -> dict[str, pd.DataFrame]:
        """Stop tracing; returns what was traced since the last take() (everything, if none)."""
        if self._C is None:
            raise UsageError("CuptiTracer.stop() before start()")
        self._parts.append(self._C.cupti_stop())
        self.stats = dict(self._C.cupti_stats())
        self.frames = _merge(self._parts)
        self._parts = []
        return self.frames

    @property
    def active(self) -> bool:
        return self._C is not None and bool(self._C.cupti_active())

    def __enter__(self) -> "CuptiTracer":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self._C is not None and self._C.cupti_active():
            self.stop()

def _merge(parts: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    # Name ids are global to the process's name table and each part carries the whole table so
    # far, so the last part's names decode every part.
    names = parts[-1]["names"] if parts else []
    merged: dict[str, Any] = {"names": names}
    for kind in ("kernels", "memcpy", "memset", "sync", "external_correlation", "overhead"):
        cols = [p[kind] for p in parts if p.get(kind)]
        if not cols:
            merged[kind] = {}
            continue

        merged[kind] = {c: np.concatenate([p[c] for p in cols]) for c in cols[0]}
    return activity_frames(merged)
