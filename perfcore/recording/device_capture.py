"""DeviceCapture: what a Recording records the GPU with (engine.gpu), and how what it recorded reaches
the store. The functions that start, follow, hand over and report on it are recording/gpu.py's."""

from __future__ import annotations

from typing import Any, Callable

from perfcore._lazy import lazy_module
from perfcore.analysis.run_parts import Capture
from perfcore.capture.activity import device_tables
from perfcore.capture.launches import LaunchPhases
from perfcore.recording import gpu

pd = lazy_module("pandas")  # imported on first use: settling needs it, recording does not

__all__ = ["DeviceCapture"]


class DeviceCapture:
    """The device kind, the stream and CUDA event timer of GPU-label phases, whether the events
    follow the GPU the work is on, the CUPTI tracer (None when kernels are not traced, or were
    handed over), the kernel-to-phase map, and what the capture noted on the way. The Recording
    reads it; recording/gpu.py's functions change it."""

    def __init__(self, kind: str, stream: Any = 0, events: Any = None, follow: bool = False):
        self.kind, self.stream, self.events, self.follow = kind, stream, events, follow
        self.now_ns: Callable[[], int] | None = None  # the clock a hand-over is stamped with (None: perfcore's)
        self.tracer = None
        self.launches = LaunchPhases()  # CUPTI correlation id -> launching phase, kept across drains
        self.handed_over: gpu.HandOver | None = None  # CUPTI given up mid-run: to whom, at which step
        self.kineto: dict[str, Any] | None = None  # torch.profiler's hold on CUPTI when kernels were asked for
        self.note: str | None = None  # kernels asked for and not traced: what was used instead, and why
        self.events_pair_ns: float | None = None  # one event pair's host cost, measured once
        self.tracing = None  # recording.tracing.Tracing: the kernel tracing's mode and cost, once traced

    @classmethod
    def open(cls, device: str, stream: Any) -> "DeviceCapture":
        return cls(*gpu.open_device(device, stream))

    def drain(self, store, spans: dict | None, wait: bool) -> None:
        """The event timer's finished pairs and CUPTI's decoded records into the store's pending
        tables. spans: the recorder's drain, which places launches made on other threads."""
        windows = None
        if self.events is not None:
            ev = self.events.resolve(wait)
            windows = {"phase_id": ev["phase_id"], "start_ns": ev["gpu_start_ns"], "end_ns": ev["gpu_end_ns"]}
            store.add(
                "events",
                {"phase_id": ev["phase_id"], "step": ev["step"], **{k: windows[k] for k in ("start_ns", "end_ns")}},
            )
        if self.tracer is not None:
            self.add_activity(store, self.tracer.take(), spans, windows)

    def add_activity(self, store, frames: dict, spans: dict | None = None, events: dict | None = None) -> None:
        """CUPTI's kernel, copy and launch frames into the store's pending tables. Each kernel's phase:
        the external id its launch carried, else the phase open when it was launched (work from
        autograd's threads), else the phase whose CUDA events bracket it on the GPU (events: the
        phases' event windows drained with it); entries outlive first use (graph launches)."""
        self.launches.add(frames, pd.DataFrame(spans) if spans is not None else None, events)
        for table, df in device_tables(frames, self.launches).items():
            store.add(table, df)

    # What the run document reads of the capture (a recording carried elsewhere answers from its facts).
    def capture_stats(self, engine) -> Capture:
        return gpu.capture_stats(engine)

    def device_name(self) -> str:
        return gpu.device_name(self.kind)

    def phase_cost(self, engine, cpu_cost: Callable[[], float]) -> float:
        return gpu.phase_cost(engine, cpu_cost)
