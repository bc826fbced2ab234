"""The native CUPTI backend: a thin Python face on perfcore._C's activity tracer."""

from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from perfcore._native import require_cupti
from perfcore.errors import CuptiError, UsageError
from perfcore.capture.columns import activity_frames, merge_activity

__all__ = ["CuptiTracer", "before_torch_profiler", "kineto_state", "synchronize_devices", "watch_torch_profiler"]


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
        # The C flag is this thread's; the Python one is set by a profiler started on any thread.
        out["active"] = bool(torch._C._autograd._profiler_enabled()) or bool(getattr(ap, "_is_profiler_enabled", False))
        # torch keeps no flag for "kineto took CUPTI"; a torch.profiler profile made since
        # watch_torch_profiler() (perfcore installs it when a CUDA recording opens) is the evidence.
        out["used"] = out["active"] or _PROFILES_MADE[0] > 0
    except Exception:  # an unfamiliar torch: say nothing is known rather than guess
        pass
    return out


_PROFILES_MADE = [0]
_BEFORE_KINETO: list[Callable[[], None]] = []  # run once, just before kineto first prepares


def before_torch_profiler(fn: Callable[[], None]) -> None:
    """Run fn (once) when the user's code next starts torch.profiler, before kineto prepares:
    kineto subscribes to CUPTI on its first use and keeps it, so a CUPTI holder must let go then
    (torch.profiler.profile, its schedule's warm-up, and torch.autograd.profiler.profile all
    prepare through torch.autograd.profiler.profile._prepare_trace). Needs watch_torch_profiler()."""
    _BEFORE_KINETO.append(fn)


def _kineto_prepares() -> None:
    _PROFILES_MADE[0] += 1
    while _BEFORE_KINETO:
        fn = _BEFORE_KINETO.pop()
        try:
            fn()
        except Exception:  # never into the user's profiler
            pass


def _wrap(cls: Any, name: str, before: Callable[[], None]) -> None:
    orig = getattr(cls, name)
    if getattr(orig, "_perfcore_watch", False):
        return

    def wrapper(self, *a, **k):
        before()
        return orig(self, *a, **k)

    wrapper._perfcore_watch = True  # type: ignore[attr-defined]
    wrapper.__name__, wrapper.__doc__ = orig.__name__, orig.__doc__
    setattr(cls, name, wrapper)


def watch_torch_profiler() -> bool:
    """From now on, count torch.profiler profiles made (a later kernels=True then knows kineto
    took CUPTI) and run the before_torch_profiler functions when one prepares. Idempotent; False
    if torch has no profiler."""
    try:
        import torch.autograd.profiler as autograd_prof  # noqa: PLC0415
        import torch.profiler.profiler as prof  # noqa: PLC0415
    except Exception:
        return False
    cls = getattr(prof, "_KinetoProfile", None)
    prepare = getattr(autograd_prof, "profile", None)
    if cls is None or prepare is None or not hasattr(prepare, "_prepare_trace"):
        return False

    def made() -> None:
        _PROFILES_MADE[0] += 1

    _wrap(cls, "__init__", made)
    _wrap(prepare, "_prepare_trace", _kineto_prepares)
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

    def __init__(
        self,
        buffer_bytes: int = 8 << 20,
        max_buffers: int = 64,
        drain_period_ms: int = 200,
        max_pending_records: int = 8_000_000,
        api_records: bool = True,
    ):
        # api_records: runtime/driver API and external-correlation records beside the kernels, copies and
        # memsets (what ties a launch to its phase by correlation id; csrc/cupti/tracer.cpp, kApiKinds).
        self.api_records = bool(api_records)
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
        try:
            self._C.cupti_start(
                self.buffer_bytes,
                self.max_buffers,
                self.drain_period_ms,
                self.max_pending_records,
                api_records=self.api_records,
            )
        except CuptiError as e:
            # CUPTI's own word for a driver older than itself is "not initialized" or "unknown".
            from perfcore.capture.environment import cupti_release, driver_cuda_version, driver_cupti_gap

            gap = None if e.held_by_other else driver_cupti_gap(driver_cuda_version(), cupti_release())
            if gap:
                # An error line for a person (as `perfcore env` says it, in report/words/__init__.py).
                raise CuptiError(
                    f"{str(e).split('; ')[0]}: the NVIDIA driver supports CUDA {gap[0]}, older than the CUPTI perfcore "
                    f"uses (CUDA {gap[1]}): kernel tracing needs a newer driver, or a torch built for CUDA {gap[0]} "
                    "(perfcore then rebuilt); CUDA events time the GPU meanwhile",
                    e.code,
                ) from e
            raise
        self._started = True
        return self

    def collect(self) -> None:
        """Flush what CUPTI has so far into this tracer (bounded memory for long runs)."""
        if not self.active:
            raise UsageError("CuptiTracer.collect() before start()")
        self._parts.append(self._C.cupti_collect())

    def pending_share(self) -> float:
        """Records decoded and not yet taken, as a share of the cap past which they are dropped."""
        return float(self._C.cupti_pending_share()) if self.active else 0.0

    def take(self) -> dict[str, pd.DataFrame]:
        """What was traced since the last take(), as frames; tracing goes on."""
        if self.active:
            self.collect()
        self.stats = dict(self._C.cupti_stats()) if self._C is not None else {}
        frames, self._parts = _merge(self._parts), []
        return frames

    def stop(self) -> dict[str, pd.DataFrame]:
        """Stop tracing; returns what was traced since the last take() (everything, if none)."""
        return self._finish("stop", "cupti_stop")

    def hand_over(self) -> dict[str, pd.DataFrame]:
        """Stop, and leave CUPTI to the next client for the rest of the process (torch.profiler):
        the GPUs synchronized, the kinds off, the rest flushed, the subscription released and
        CUPTI finalized where that is safe (stats["finalized"]). Returns the rest, as stop()."""
        return self._finish("hand_over", "cupti_hand_over")

    def _finish(self, what: str, call: str) -> dict[str, pd.DataFrame]:
        if not self.active:
            raise UsageError(f"CuptiTracer.{what}() before start()")
        self._started = False
        self.synced_at_stop = synchronize_devices()
        self._parts.append(getattr(self._C, call)())
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
