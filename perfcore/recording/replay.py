"""A recording carried to another process before anything was settled: its raw spans, CUDA-event
intervals and step ends as arrays, and what only its own process could read (the capture
statistics, the device's name, one phase's cost) as plain values. `perfcore run`'s parent rebuilds
it and settles it there, with the same code the instrumented process would have used.

Only a recording with nothing settled or pending and no CUPTI tracer is carried: its state is then
exactly what the native recorder and event timer still hold, so nothing is lost in the carrying."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfcore.recording.engine import FIRST_CUSTOM, Recording, phase_cost_ns
from perfcore.recording.device_capture import DeviceCapture
from perfcore.recording.phase_names import PhaseNames

__all__ = ["can_carry", "export", "replayed"]

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
    first_ns, created_ns = engine.started_ns
    meta = {
        "device": engine.device,
        "device_name": engine.device_name(),
        "backend": engine.backend,
        "warmup": engine.warmup,
        "step_on": engine.step_on,
        "names": {str(k): v for k, v in engine.phases.names.items()},
        "labels": {str(k): v for k, v in engine.phases.labels.items()},
        "shared_phase_ids": sorted(int(p) for p in engine.store.shared_phase_ids),
        "t_first": first_ns,
        "t_created": created_ns,
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


class _CarriedCapture(DeviceCapture):
    """The capture of a carried recording: no events or tracer here; what only the recording's own
    process could read (the capture statistics, the device's name, one phase's cost) comes with it."""

    def __init__(self, meta: dict[str, Any]):
        super().__init__(meta["device"])
        self._meta = meta

    def capture_stats(self, engine) -> dict[str, Any]:
        return dict(self._meta["capture"])

    def device_name(self) -> str:
        return self._meta["device_name"]

    def phase_cost(self, engine, cpu_cost) -> float:
        return float(self._meta["phase_cost_ns"])  # as measured where the phases ran


def replayed(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Recording:
    """The recording export() carried, rebuilt in a process that never ran the loop. It loads
    neither torch nor perfcore's native core (a CUDA build's core would load torch first): the
    device is a name, the events are already intervals, the spans already arrays. It holds what
    settling and the run document read; recording into it is not possible."""
    import pandas as pd

    phases = PhaseNames(
        {int(k): v for k, v in meta["names"].items()}, {int(k): v for k, v in meta["labels"].items()}, FIRST_CUSTOM
    )
    rec = Recording.assembled(
        _CarriedCapture(meta),
        _NoNewSpans(),
        _Ends(arrays["step_ends_ns"]),
        phases,
        warmup=int(meta["warmup"]),
        step_on=meta["step_on"],
        created_ns=int(meta["t_created"]),
    )
    rec.restore(
        backend=meta["backend"],
        first_ns=meta["t_first"],
        settle_ns=int(meta["settle_ns"]),
        upkeep_errors=int(meta["upkeep_errors"]),
        notes=meta["notes"],
    )
    rec.store.shared_phase_ids = set(meta["shared_phase_ids"])
    rec.store.add("spans", pd.DataFrame({c: arrays[f"span_{c}"] for c in _SPANS}))
    if "event_phase_id" in arrays:
        rec.store.add("events", pd.DataFrame({c: arrays[f"event_{c}"] for c in _EVENTS.values()}))
    return rec
