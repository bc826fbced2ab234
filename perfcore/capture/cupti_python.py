"""The cupti-python backend: NVIDIA's `cupti-python` activity API, in the columns the native tracer gives.

Used where the native tracer cannot start (an extension built without CUPTI) and as an
independent cross-check of it on a GPU. It loads the libcupti that torch loads (the
nvidia-cuda-cupti wheel, found by cuda-pathfinder; a library with the same soname is never
loaded twice), so it never replaces torch's CUPTI; its major version must match that library's.

Records reach Python as one object per record (cupti-python's design), so draining costs a few
microseconds per record where the native tracer costs tens of nanoseconds: bench/gpu_check.py
measures both (the decoding into the native tracer's columns: cupti_python_records). The same
rules as the native tracer hold: the same activity kinds (API kinds included, since
external-correlation records come only with them), default flushes from a drain thread and one
forced flush at stop, dropped counts summed, invalid timestamps dropped and counted.
"""

from __future__ import annotations

import ctypes
import threading
import time
import warnings
from typing import Any

import pandas as pd

from perfcore.capture.columns import activity_frames, merge_activity
from perfcore.capture.cupti_python_kinds import (
    PACKAGE,
    check_versions,
    decoded_nothing,
    disable_kernel_safe,
    install_advice,
    loaded_cupti_version,
)
from perfcore.capture.cupti_python_kinds import torch_cuda as _torch_cuda
from perfcore.capture.cupti_python_kinds import Kinds as _Kinds
from perfcore.capture.cupti_python_records import records_to_columns
from perfcore.capture.native_cupti import synchronize_devices
from perfcore.errors import CuptiError, DeviceUnavailable, UsageError

__all__ = [
    "CuptiPythonTracer",
    "records_to_columns",
    "load_cupti",
    "decoded_nothing",
    "PACKAGE",
    "check_versions",
]

_WORK = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET")  # the native tracer's kinds, as it chooses them
_API = ("SYNCHRONIZATION", "RUNTIME", "DRIVER", "EXTERNAL_CORRELATION", "OVERHEAD")


def load_cupti():
    """The `cupti.cupti` module, or DeviceUnavailable saying how to install it."""
    try:
        from cupti import cupti
    except ImportError as e:
        raise DeviceUnavailable(f"the cupti-python backend needs the {PACKAGE} package ({e}); {_install()}") from None
    return cupti


def _install() -> str:
    try:
        import torch

        return install_advice(torch.version.cuda)
    except Exception:  # no torch: the advice cannot name a release
        return install_advice(None)


def _installed(*dists: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for d in dists:
        try:
            return version(d)
        except PackageNotFoundError:
            continue
    return None


def _native_tagging(on: bool) -> None:
    """perfcore's native phases push their id as external correlation while this backend traces:
    the id stack is libcupti's, shared by every client in the process."""
    try:
        from perfcore._native import native

        C = native()
        if C.CUPTI_COMPILED:
            C.cupti_set_tagging(on)
    except Exception:
        pass  # a build without the native part: launches are placed by their time alone


class CuptiPythonTracer:
    """The native CuptiTracer's interface (start, take, stop, active, stats, frames) on cupti-python.

    CUPTI is process-wide: one subscriber at a time, so this and the native tracer cannot run
    together; start() raises CuptiError when CUPTI is held.
    """

    name = "cupti-python"

    def __init__(self, buffer_bytes: int = 8 << 20, drain_period_ms: int = 200, api_records: bool = True):
        self.api_records = bool(api_records)  # the API and external-correlation kinds too (as the native tracer's)
        self.buffer_bytes = int(buffer_bytes)
        self.drain_period_ms = int(drain_period_ms)
        self.frames: dict[str, pd.DataFrame] | None = None
        self.stats: dict[str, Any] = {}
        self._cupti = None
        self._kinds: _Kinds | None = None
        self._sub = None
        self._enabled: list[Any] = []
        self._names: dict[str, int] = {}
        self._parts: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # guards _parts and the counters (the callback runs on CUPTI's thread)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._active = False
        self._offset_ns = 0
        self._offset_start_ns = 0
        self._counts = {
            "buffers_completed": 0,
            "records": 0,
            "dropped_records": 0,
            "invalid_timestamps": 0,
            "other_records": 0,
            "flushes": 0,
            "flush_ns": 0,
            "forced_flush_ns": 0,
            "decode_ns": 0,
            "callback_errors": 0,
            "concurrent_kernel_left_on": False,
        }

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> "CuptiPythonTracer":
        if self._active:
            raise UsageError("this cupti-python tracer is already running")
        cupti = load_cupti()
        import torch

        reason = check_versions(
            _installed(PACKAGE) or "0", torch.version.cuda, _installed("nvidia-cuda-cupti", "nvidia-cuda-cupti-cu12")
        )
        if reason:
            raise DeviceUnavailable(reason)
        self._cupti, self._kinds = cupti, _Kinds(cupti)
        if self._kinds.missing():
            raise DeviceUnavailable(
                f"{PACKAGE} {_installed(PACKAGE)} has no record class perfcore reads for "
                f"{', '.join(self._kinds.missing())}; {install_advice(torch.version.cuda)}"
            )
        try:
            # Subscribing claims CUPTI's one subscriber slot: the reliable way to learn that
            # torch.profiler, nsys or perfcore's native tracer already holds it.
            self._sub = cupti.subscribe(lambda *a: None, 0)
            cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
            self._measure_offset()
            self._offset_start_ns = self._offset_ns
            for name in _WORK + (_API if self.api_records else ()):
                kind = getattr(cupti.ActivityKind, name)
                cupti.activity_enable(kind)
                self._enabled.append(kind)
        except Exception as e:
            self._release()
            status = getattr(e, "status", None)
            raise CuptiError(
                f"cupti-python could not start tracing: {e}", int(status) if status is not None else -1
            ) from None
        self._active = True
        _native_tagging(self.api_records)  # no external-correlation record comes without API records
        self._stop.clear()
        self._thread = threading.Thread(target=self._drain_loop, name="perfcore-cupti-python", daemon=True)
        self._thread.start()
        return self

    def take(self) -> dict[str, pd.DataFrame]:
        """What was traced since the last take(), as frames; tracing goes on."""
        if self._active:
            self._flush(0)
        return self._frames()

    def stop(self) -> dict[str, pd.DataFrame]:
        if not self._active:
            raise UsageError("CuptiPythonTracer.stop() before start()")
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        safe = disable_kernel_safe(loaded_cupti_version(), _torch_cuda())
        keep = None if safe else self._cupti.ActivityKind.CONCURRENT_KERNEL  # left on where disabling it hangs
        self._counts["concurrent_kernel_left_on"] = keep in self._enabled
        for kind in self._enabled:
            if kind != keep:
                self._cupti.activity_disable(kind)
        self._enabled = []
        synchronize_devices()  # kernels still running would reach the forced flush incomplete
        t0 = time.perf_counter_ns()
        self._flush(1)  # the one forced flush: incomplete records included, at the end
        self._counts["forced_flush_ns"] = time.perf_counter_ns() - t0
        self._release()
        self._active = False
        _native_tagging(False)
        self.frames = self._frames()
        warn = decoded_nothing(self.stats, _torch_cuda())
        if warn:
            warnings.warn(warn, RuntimeWarning, stacklevel=2)
        return self.frames

    @property
    def active(self) -> bool:
        return self._active

    def __enter__(self) -> "CuptiPythonTracer":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self._active:
            self.stop()

    # -- internals ----------------------------------------------------------------------------
    def _release(self) -> None:
        for kind in self._enabled:
            try:
                self._cupti.activity_disable(kind)
            except Exception:
                pass
        self._enabled = []
        if self._sub is not None:
            try:
                self._cupti.unsubscribe(self._sub)
            except Exception:
                pass
            self._sub = None

    def _measure_offset(self) -> None:
        a = time.perf_counter_ns()
        t = int(self._cupti.get_timestamp())
        b = time.perf_counter_ns()
        self._offset_ns = t - (a + (b - a) // 2)

    def _buffer_requested(self):
        return self.buffer_bytes, 0  # size, max records (0: as many as fit)

    def _buffer_completed(self, activities: list) -> None:
        # Runs on CUPTI's thread: convert and queue, never raise into CUPTI.
        try:
            t0 = time.perf_counter_ns()
            raw = records_to_columns(activities, self._names, self._kinds, self._offset_ns)
            with self._lock:
                self._parts.append(raw)
                c = self._counts
                c["buffers_completed"] += 1
                c["records"] += raw["records"]
                c["invalid_timestamps"] += raw["invalid_timestamps"]
                c["other_records"] += raw["other_records"]
                c["decode_ns"] += time.perf_counter_ns() - t0
        except Exception:
            with self._lock:
                self._counts["callback_errors"] += 1

    def _flush(self, flag: int) -> None:
        t0 = time.perf_counter_ns()
        self._cupti.activity_flush_all(flag)
        dropped = ctypes.c_size_t(0)
        try:  # resets on read, so every read is added
            self._cupti.activity_get_num_dropped_records(0, 0, ctypes.addressof(dropped))
        except Exception:
            pass
        self._measure_offset()
        with self._lock:
            self._counts["dropped_records"] += int(dropped.value)
            self._counts["flushes"] += 1
            self._counts["flush_ns"] += time.perf_counter_ns() - t0

    def _drain_loop(self) -> None:
        while not self._stop.wait(self.drain_period_ms / 1000):
            try:
                self._flush(0)  # default flush: completed buffers only, no stall of the launching threads
            except Exception:
                with self._lock:
                    self._counts["callback_errors"] += 1

    def _frames(self) -> dict[str, pd.DataFrame]:
        with self._lock:
            parts, self._parts = self._parts, []
            self.stats = dict(
                self._counts,
                timestamp_callback=False,
                clock_offset_ns=self._offset_ns,
                clock_drift_ns=self._offset_ns - self._offset_start_ns,
            )
        return activity_frames(merge_activity(parts) if parts else {"names": list(self._names)})
