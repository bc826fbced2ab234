"""A recording carried to another process before anything was settled: its raw spans, CUDA-event
intervals and step ends as arrays, and what only its own process could read (the capture
statistics, the device's name, one phase's cost) as plain values. `perfcore run`'s parent rebuilds
it and settles it there, with the same code the instrumented process would have used.

Only a recording with nothing settled or pending and no CUPTI tracer is carried: its state is then
exactly what the native recorder and event timer still hold, so nothing is lost in the carrying."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfcore.analysis.store import StepStore
from perfcore.recording import document
from perfcore.recording.engine import FIRST_CUSTOM, Recording, phase_cost_ns
from perfcore.recording.gpu import DeviceCapture
from perfcore.recording.phase_names import PhaseNames

__all__ = ["can_carry", "export", "Replayed"]

_SPANS = ("phase_id", "step", "start_ns", "end_ns", "thread_id")
_EVENTS = {"phase_id": "phase_id", "step": "step", "gpu_start_ns": "start_ns", "gpu_end_ns": "end_ns"}


def can_carry(engine: Recording) -> bool:
    store = engine.store
    return (
        engine.gpu.tracer is None
        and store.settled == 0
        and not any(store.pending.values())
        and engine.gpu.handed_over is None
    )


def export(engine: Recording) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, arrays) of a recording can_carry() accepts. Drains the recorder and waits for the
    CUDA events, as the final settle would."""
    spans = engine.spans.drain()
    arrays = {f"span_{c}": np.asarray(spans[c]) for c in _SPANS}
    if engine.event_timer is not None:
        ev = engine.event_timer.resolve(True)
        arrays.update({f"event_{to}": np.asarray(ev[frm]) for frm, to in _EVENTS.items()})
    ends = engine.boundaries
    arrays["step_ends_ns"] = np.frombuffer(ends.since(0), dtype=np.int64).copy()
    capture = engine.capture_stats()  # after the events resolved; it may add notes
    meta = {
        "device": engine.device,
        "device_name": engine.device_name(),
        "backend": engine.backend,
        "warmup": engine.warmup,
        "step_on": engine.step_on,
        "names": {str(k): v for k, v in engine.phases.names.items()},
        "labels": {str(k): v for k, v in engine.phases.labels.items()},
        "shared_phase_ids": sorted(int(p) for p in engine.store.shared_phase_ids),
        "t_first": engine._t_first,
        "t_created": int(engine._t_created),
        "settle_ns": int(engine.settle_ns),
        "upkeep_errors": int(engine.upkeep_errors),
        "notes": list(engine.notes),
        "capture": capture,
        "phase_cost_ns": phase_cost_ns(),
    }
    return meta, arrays


class _Ends:
    """The step ends as the settling reads them (StepEnds' since/trim/len), from an array."""

    def __init__(self, ends: np.ndarray):
        self._ends = np.asarray(ends, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._ends)

    def since(self, k: int) -> bytes:
        return self._ends[k:].tobytes()

    def trim(self, k: int) -> None:
        pass  # nothing to let go of: the rebuilt recording lives only while its part is written


class _NoNewSpans:
    """The recorder of a rebuilt recording: every span came with it, none opens or arrives."""

    def open_phases(self) -> list[int]:
        return []

    def drain(self) -> dict[str, np.ndarray]:
        return {c: np.zeros(0, dtype=np.int32 if c == "phase_id" else np.int64) for c in _SPANS}


class Replayed(Recording):
    """The recording export() carried, rebuilt in a process that never ran the loop. It loads
    neither torch nor perfcore's native core (a CUDA build's core would load torch first): the
    device is a name, the events are already intervals, the spans already arrays. It holds what
    settling and the run document read; recording into it is not possible."""

    # Not super().__init__(): it would open a device.
    def __init__(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]):
        import pandas as pd

        self._meta = meta
        self.device, self.backend, self.step_on = meta["device"], meta["backend"], meta["step_on"]
        self.warmup = int(meta["warmup"])
        self.phases = PhaseNames(
            {int(k): v for k, v in meta["names"].items()}, {int(k): v for k, v in meta["labels"].items()}, FIRST_CUSTOM
        )
        self._rec, self.gpu = _NoNewSpans(), DeviceCapture(self.device)
        self.store = StepStore(
            self.phases.labels, FIRST_CUSTOM, on_gpu=self.device == "cuda", use_kernels=False, warmup=self.warmup
        )
        self.store.shared_phase_ids = set(meta["shared_phase_ids"])
        self.store.add("spans", pd.DataFrame({c: arrays[f"span_{c}"] for c in _SPANS}))
        if "event_phase_id" in arrays:
            self.store.add("events", pd.DataFrame({c: arrays[f"event_{c}"] for c in _EVENTS.values()}))
        self._boundaries = _Ends(arrays["step_ends_ns"])
        self._t_first, self._t_created = meta["t_first"], int(meta["t_created"])
        self.settle_ns, self.upkeep_errors = int(meta["settle_ns"]), int(meta["upkeep_errors"])
        self.notes = list(meta["notes"])

    def capture_stats(self) -> dict[str, Any]:
        return dict(self._meta["capture"])

    def device_name(self) -> str:
        return self._meta["device_name"]

    def document(self, top_kernels: int = 10, *, settle: bool = True, evaluation_rows=None) -> dict[str, Any]:
        if settle:
            self.summary()
        # One phase's cost as measured where the phases ran.
        return document.run_document(
            self, self._last_table, float(self._meta["phase_cost_ns"]), top_kernels, evaluation_rows
        )
