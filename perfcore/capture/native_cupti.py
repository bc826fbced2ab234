"""The native CUPTI backend: a thin Python face on perfcore._C's activity tracer."""
from __future__ import annotations

from typing import Any

import pandas as pd

from perfcore._native import require_cupti
from perfcore.errors import UsageError
from perfcore.capture.columns import activity_frames, merge_activity

__all__ = ["CuptiTracer", "kineto_state", "synchronize_devices"]


def kineto_state() -> dict[str, bool]:
    """What torch.profiler (kineto) does with CUPTI in this process, read without starting it:
    available (torch built with kineto), active (a profiler is recording now), used (one ran
    before: kineto then keeps its CUPTI subscription until the process ends)."""
    import sys

    out = {"available": False, "active": False, "used": False}
    torch = sys.modules.get("torch")
    if torch is None:
        return out
    try:
        ap = torch.autograd.profiler
        out["available"] = bool(ap.kineto_available())
        out["active"] = bool(torch._C._autograd._profiler_enabled())
        # torch keeps no flag for "kineto took CUPTI"; a torch.profiler profile made since
        # watch_torch_profiler() (perfcore installs it when a CUDA recording opens) is the evidence.
        out["used"] = out["active"] or _PROFILES_MADE[0] > 0
    except Exception:  # an unfamiliar torch: say nothing is known rather than guess
        pass
    return out


_PROFILES_MADE = [0]


def watch_torch_profiler() -> bool:
    """Count torch.profiler.profile objects made from now on (a wrapper on its __init__), so a
    later kernels=True knows kineto took CUPTI. Idempotent; False if torch has no profiler."""
    import sys

    prof = sys.modules.get("torch.profiler.profiler")
    if prof is None:
        try:
            import torch.profiler.profiler as prof  # noqa: PLC0415
        except Exception:
            return False
    cls = getattr(prof, "_KinetoProfile", None)
    if cls is None or getattr(cls.__init__, "_perfcore_watch", False):
        return cls is not None
    orig = cls.__init__

    def __init__(self, *a, **k):
        _PROFILES_MADE[0] += 1
        orig(self, *a, **k)

    __init__._perfcore_watch = True  # type: ignore[attr-defined]
    cls.__init__ = __init__
    return True


def synchronize_devices() -> bool:
    """Wait for the work of every GPU this process uses, so kernels still running reach CUPTI's
    buffers complete before the final forced flush (CUPTI leaves that to the client: a forced
    flush hands over incomplete records, which are lost). A GPU with no context yet has no work,
    and synchronizing it would make one (hundreds of MB on a GPU the run never touched).
    True when it synchronized."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        if not torch.cuda.is_initialized():
            return False
        has_context = getattr(torch._C, "_cuda_hasPrimaryContext", lambda i: True)
        for i in range(torch.cuda.device_count()):
            if has_context(i):
                torch.cuda.synchronize(i)
        return True
    except Exception:  # a broken context: the flush still runs and counts what it lost
        return False

class CuptiTracer:
    """Traces kernels, memcpys, memsets, syncs and CUPTI's own overhead on the perfcore clock.

    with CuptiTracer() as t:
        ...                      # GPU work
    frames = t.frames            # {"kernels": DataFrame, "memcpy": DataFrame, ...}

    CUPTI is process-wide: one tracer at a time (a second start raises CuptiError). The native
    drain thread flushes completed buffers every `drain_period_ms` and decodes them into columns,
    never in CUPTI's callbacks; collect()/take() hand those columns over.
    """

    name = "native-cupti"

    def __init__(self, buffer_bytes: int = 8 << 20, max_buffers: int = 64, drain_period_ms: int = 200,
                 max_pending_records: int = 8_000_000):
        self.buffer_bytes = int(buffer_bytes)
        self.max_buffers = int(max_buffers)
        self.drain_period_ms = int(drain_period_ms)
        self.max_pending_records = int(max_pending_records)
        self._C = None
        self._started = False  # this object started the process's one tracer (and may stop it)
        self._parts: list[dict[str, Any]] = []
        self.frames: dict[str, pd.DataFrame] | None = None
        self.stats: dict[str, Any] = {}
        self.synced_at_stop = False

    def start(self) -> "CuptiTracer":
        self._C = require_cupti("kernel tracing")
        self._C.cupti_start(self.buffer_bytes, self.max_buffers, self.drain_period_ms, self.max_pending_records)
        self._started = True
        return self

    def collect(self) -> None:
        """Flush what CUPTI has so far into this tracer (bounded memory for long runs)."""
        if not self.active:
            raise UsageError("CuptiTracer.collect() before start()")
        self._parts.append(self._C.cupti_collect())

    def take(self) -> dict[str, pd.DataFrame]:
        """What was traced since the last take(), as frames; tracing goes on."""
        if self.active:
            self.collect()
        self.stats = dict(self._C.cupti_stats()) if self._C is not None else {}
        frames, self._parts = _merge(self._parts), []
        return frames

    def stop(self) -> dict[str, pd.DataFrame]:
        """Stop tracing; returns what was traced since the last take() (everything, if none)."""
        if not self.active:
            raise UsageError("CuptiTracer.stop() before start()")
        self._started = False
        self.synced_at_stop = synchronize_devices()
        self._parts.append(self._C.cupti_stop())
        self.stats = dict(self._C.cupti_stats())
        self.frames = _merge(self._parts)
        self._parts = []
        return self.frames

    @property
    def active(self) -> bool:
        return self._started and bool(self._C.cupti_active())

    def __enter__(self) -> "CuptiTracer":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.active:
            self.stop()

def _merge(parts: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    return activity_frames(merge_activity(parts))
