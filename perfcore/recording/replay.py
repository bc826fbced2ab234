"""A recording carried to another process: its raw spans, CUDA-event intervals and step ends as
arrays, what it settled already (the settled columns, the kept detail, the running sums), and what
only its own process could read (the capture statistics, the device's name, one phase's cost) as
plain values. `perfcore run`'s parent rebuilds it and settles the rest there, with the same code the
instrumented process would have used; the instrumented process never builds a DataFrame (pandas'
import alone is 0.3-2.5 s) nor holds its whole steps table at once.

A recording with a CUPTI tracer, or whose kernels and copies were recorded, is not carried (kernel
names are strings, which the arrays do not carry): its own process writes its part."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfcore.analysis.attribution import OWN_PHASE_ID
from perfcore.analysis.columns import concat, empty, nrows
from perfcore.analysis.run_parts import Capture
from perfcore.analysis.store import EMPTY, StepStore
from perfcore.recording.engine import FIRST_CUSTOM, Recording, phase_cost_ns
from perfcore.recording.device_capture import DeviceCapture
from perfcore.recording.phase_names import PhaseNames

__all__ = ["can_carry", "export", "replayed", "settled_columns"]

_SPANS = tuple(EMPTY["spans"])
_EVENTS = {"phase_id": "phase_id", "step": "step", "gpu_start_ns": "start_ns", "gpu_end_ns": "end_ns"}


_ROW_BLOCK = 1 << 16  # settled rows restored at a time
_KEEP = ("through", "end_ns", "capped", "slowest")  # DetailSteps' state besides its window
# The store's running figures, carried as they are.
_STATE = ("settled", "t0", "last_end", "measured", "wall_ns", "events_from_ns")


def can_carry(engine: Recording) -> bool:
    store = engine.store
    held = [*store.pending["kernels"], *store.pending["copies"], store.detail["kernels"], store.detail["copies"]]
    return (
        engine.gpu.tracer is None
        and engine.gpu.handed_over is None
        and not store.kernel_agg
        and not store.copy_agg
        and not any(nrows(t) for t in held)
    )


def settled_columns(engine: Recording):
    """(name, array) of each settled column, one at a time: the file takes them without the whole
    table ever being in memory at once."""
    rows = engine.store.rows
    for name in rows.names:
        yield f"row_{name}", rows.column(name)


def _store_state(store: StepStore) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    keep = store.keep
    meta = {
        **{k: getattr(store, k) for k in _STATE},
        "rows": store.rows.n,
        "row_names": store.rows.names,
        # The pending spans are carried as spans and counted again when the parent adds them.
        "span_count": store.span_count
        - sum(int((p["phase_id"] != OWN_PHASE_ID).sum()) for p in store.pending["spans"]),
        "label_ns": dict(store.label_ns),
        "keep": {**{k: getattr(keep, k) for k in _KEEP}, "window": [[s, *w] for s, w in keep.window.items()]},
    }
    arrays = {}
    for t in ("spans", "events"):
        for c, a in concat([store.detail[t]], EMPTY[t]).items():
            arrays[f"detail_{t}_{c}"] = a
    return meta, arrays


def _restore_store(store: StepStore, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    for k in (*_STATE, "span_count"):
        setattr(store, k, meta[k])
    store.label_ns = dict(meta["label_ns"])
    keep = store.keep
    for k in _KEEP:
        setattr(keep, k, meta["keep"][k])
    keep.slowest = tuple(keep.slowest) if keep.slowest is not None else None
    keep.window = {int(s): (int(a), int(b)) for s, a, b in meta["keep"]["window"]}
    for t in ("spans", "events"):
        store.detail[t] = {c: arrays[f"detail_{t}_{c}"] for c in EMPTY[t]}
    n = int(meta["rows"])
    for i in range(0, n, _ROW_BLOCK):
        k = min(_ROW_BLOCK, n - i)
        store.rows.append({c: arrays[f"row_{c}"][i : i + k] for c in meta["row_names"]}, k)


def export(engine: Recording) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, arrays) of a recording can_carry() accepts, less its settled columns (settled_columns()).
    Drains the recorder and waits for the CUDA events, as the final settle would."""
    store = engine.store
    drained = engine.spans.drain()
    spans = concat([*store.pending["spans"], {c: np.asarray(drained[c]) for c in _SPANS}], EMPTY["spans"])
    arrays = {f"span_{c}": spans[c] for c in _SPANS}
    events = list(store.pending["events"])
    if engine.event_timer is not None:
        ev = engine.event_timer.resolve(True)
        events.append({to: np.asarray(ev[frm]) for frm, to in _EVENTS.items()})
    if events:
        arrays.update({f"event_{c}": a for c, a in concat(events, EMPTY["events"]).items()})
    state, detail = _store_state(store)
    arrays.update(detail)
    ends = engine.boundaries
    arrays["step_ends_ns"] = np.frombuffer(ends.since(store.settled), dtype=np.int64).copy()
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
        "capture": capture.to_doc(),
        "phase_cost_ns": phase_cost_ns(),
        "store": state,
    }
    return meta, arrays


class _Ends:
    """The step ends as the settling reads them (StepEnds' since/trim/len), from an array of the
    ends of steps first, first + 1, ... (those before were settled where the recording was made)."""

    def __init__(self, ends: np.ndarray, first: int = 0):
        self._ends, self._first = np.asarray(ends, dtype=np.int64), int(first)

    def __len__(self) -> int:
        return self._first + len(self._ends)

    def __getitem__(self, i: int) -> int:
        if i < 0:
            i += len(self)
        if not self._first <= i < len(self):
            raise IndexError(i)
        return int(self._ends[i - self._first])

    def since(self, k: int) -> bytes:
        if k < self._first:
            raise IndexError(f"step ends before {self._first} were let go")
        return self._ends[k - self._first :].tobytes()

    def trim(self, k: int) -> None:
        pass  # nothing to let go of: the rebuilt recording lives only while its part is written


class _NoNewSpans:
    """The recorder of a rebuilt recording: every span came with it, none opens or arrives."""

    def open_phases(self) -> list[int]:
        return []

    def drain(self) -> dict[str, np.ndarray]:
        return empty(EMPTY["spans"])


class _CarriedCapture(DeviceCapture):
    """The capture of a carried recording: no events or tracer here; what only the recording's own
    process could read (the capture statistics, the device's name, one phase's cost) comes with it."""

    def __init__(self, meta: dict[str, Any]):
        super().__init__(meta["device"])
        self._meta = meta

    def capture_stats(self, engine) -> Capture:
        return Capture.from_doc(self._meta["capture"], "capture")

    def device_name(self) -> str:
        return self._meta["device_name"]

    def phase_cost(self, engine, cpu_cost) -> float:
        return float(self._meta["phase_cost_ns"])  # as measured where the phases ran


def replayed(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Recording:
    """The recording export() carried, rebuilt in a process that never ran the loop. It loads
    neither torch nor perfcore's native core (a CUDA build's core would load torch first): the
    device is a name, the events are already intervals, the spans already arrays. It holds what
    settling and the run document read; recording into it is not possible."""
    state = meta.get("store")  # none in a part carried before anything settled
    phases = PhaseNames(
        {int(k): v for k, v in meta["names"].items()}, {int(k): v for k, v in meta["labels"].items()}, FIRST_CUSTOM
    )
    rec = Recording.assembled(
        _CarriedCapture(meta),
        _NoNewSpans(),
        _Ends(arrays["step_ends_ns"], state["settled"] if state else 0),
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
    if state:
        _restore_store(rec.store, state, arrays)
    rec.store.add("spans", {c: arrays[f"span_{c}"] for c in _SPANS})
    if "event_phase_id" in arrays:
        rec.store.add("events", {c: arrays[f"event_{c}"] for c in _EVENTS.values()})
    return rec
