"""One process's part of a run (parts/<key>/): run.json, steps.csv and trace.npz, written from its
recording and what only that process knew (its facts: exit, loaders, memory samples, notes).

The instrumented process writes the raw part (raw.npz: the recording's arrays, its settled columns
and the memory samples; raw.json, written last: the recording's meta and the facts) and never
imports pandas; the parent, which has pandas loaded already, turns it into the same three files
with the same code (finish_raw), and removes the raw files. Only a recording that traced kernels
(CUPTI) writes the three files itself (write_steps). A part without raw.json was cut short: the
reader falls back to the process's last checkpoint, as it does for a missing run.json."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from perfcore.analysis.codec import Count, from_doc
from perfcore.analysis.labels import LABELS
from perfcore.analysis.run_parts import Overhead
from perfcore.recording.own_work import OwnCosts, beside_steps, overhead_doc
from perfcore import jsonio
from perfcore.run.lines import LineFacts, label_spans, lines_document, sampler_share, trace_arrays
from perfcore.run.split_facts import compute_document
from perfcore.run.protocol import RAW_JSON, RAW_NPZ
from perfcore.untrusted import open_regular, read_file

__all__ = ["RAW_SCHEMA", "PartFacts", "write_raw", "finish_raw", "write_steps", "startup_summary"]

RAW_SCHEMA = "perfcore.rawpart/1"
RAW_META_CAP = 256 << 20  # raw.json: the recording's meta and the facts, far less than this


@dataclasses.dataclass(frozen=True)
class PartFacts:
    """What only the instrumented process knew (run.child.part_writer's facts: its exit's figures and
    loaders in `common`, evaluation rows and passes, memory, the step source's counts, notes, the backend
    it fell back from, its host lines and own costs, the optimizer), read once where its part is written:
    in that process, or from a raw part's raw.json. Lines, own costs and the optimizer are absent from a
    part written before they were kept."""

    common: dict[str, Any]
    cpu_util_percent: float | None
    eval_rows: tuple[Count, ...]
    eval_passes: tuple[tuple[int, int], ...]
    mem_kind: str
    memory_limits: dict[str, Any]
    skipped_boundaries: Count
    training_batches: Count
    scaler_skipped_steps: Count
    t_start: int
    notes: tuple[str, ...]
    backend_note: str | None
    requested_backend: str | None
    lines: LineFacts | None = None
    own_costs: OwnCosts | None = None
    optimizer: Any = None


def write_raw(engine, facts: dict[str, Any], mem_at, mem_bytes, part: Path) -> None:
    """raw.json + raw.npz: the recording as replay.export() carries it, for the parent to finish
    (finish_raw). The instrumented process writes it column by column: no DataFrame, no pandas, and
    never the whole steps table at once."""
    from perfcore.recording.replay import export, settled_columns

    meta, arrays = export(engine)
    arrays.update(x_mem_at=np.asarray(mem_at, dtype=np.int64), x_mem_bytes=np.asarray(mem_bytes, dtype=np.int64))
    with jsonio.atomic_path(part / RAW_NPZ) as tmp, open(tmp, "wb") as fh:  # a file: numpy adds no ".npz"
        _save_npz(fh, itertools.chain(arrays.items(), settled_columns(engine)))  # a column at a time
    jsonio.write(part / RAW_JSON, {"schema": RAW_SCHEMA, "recording": meta, "facts": facts})


def _save_npz(fh, items) -> None:
    """np.savez of (name, array) items taken one at a time (np.savez wants them all at once)."""
    import zipfile

    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, a in items:
            with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asarray(a), allow_pickle=False)


def finish_raw(part: Path) -> None:
    """raw.json + raw.npz -> run.json, steps.csv, trace.npz in the same folder (raises on a bad part)."""
    from perfcore.recording.replay import replayed

    # A raw part on disk is untrusted (a copied folder): neither file is read through a link.
    doc = json.loads(read_file(part / RAW_JSON, RAW_META_CAP, "raw part's meta"))
    if not isinstance(doc, dict) or doc.get("schema") != RAW_SCHEMA:  # the one key read before the schema is known
        raise ValueError(f"{part / RAW_JSON}: not a {RAW_SCHEMA} document")
    with open_regular(part / RAW_NPZ) as fh, np.load(fh, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    mem_at, mem_bytes = arrays.pop("x_mem_at"), arrays.pop("x_mem_bytes")
    engine = replayed(doc["recording"], arrays)
    del arrays  # the settled columns are in the recording's own (spilled) columns now: not held twice
    write_steps(engine, doc["facts"], mem_at, mem_bytes, part)
    for name in (RAW_NPZ, RAW_JSON):
        (part / name).unlink()


CSV_SLICE = 65_536  # steps.csv rows made and written at a time: the slice, not the run, sets the peak


def write_steps(engine, facts: Mapping[str, Any], mem_at, mem_sampled, part, close=lambda: None) -> None:
    """A part's run.json, steps.csv and trace.npz from a recording (the instrumented process's own,
    or the one the parent rebuilt from a raw part) and the process's facts. The steps table is never
    held whole (~120 bytes a step): each summary reads the store's columns it needs, one at a time
    where it can, and steps.csv is made and written in slices."""
    import pandas as pd

    known = from_doc(PartFacts, dict(facts), "facts")  # a fact that is not what it says: BadDocument naming it
    engine.settle_all()
    store = engine.store
    n = store.settled
    rows = [r for r in known.eval_rows if r < n]
    is_eval = np.zeros(n, dtype=bool)
    is_eval[rows] = True
    # One summary of the run: the evaluation rows are set apart in it (out of the step statistics,
    # the robust breakdown and the verdict) and their cost is a finding of its own.
    doc = dict(engine.document(settle=False, table=_summary_frame(store, is_eval)))
    close()
    evaluation = _evaluation(rows, known.eval_passes, store)
    if evaluation:
        # The rows' indices and the passes seen by the step source are this side's; the cost per row
        # and the share of the wall time are the analysis's.
        doc["evaluation"] = {**doc.get("evaluation", {}), **evaluation}
    mem = np.full(n, -1, dtype=np.int64)  # -1: not sampled at that step
    at, sampled = np.asarray(mem_at, dtype=np.int64), np.asarray(mem_sampled, dtype=np.int64)
    inside = (at >= 0) & (at < n)
    mem[at[inside]] = sampled[inside]
    warmup = store.column("warmup")
    training = ~warmup & ~is_eval
    sources = engine.ms_sources()
    sampled_mem = mem[training & (mem >= 0)]

    def ms(col: str) -> pd.Series:  # a steps.csv column in ms, made from its ns column when asked
        ns = sources[col]
        return (pd.Series(store.column(ns)) if ns is not None else pd.Series(0, index=pd.RangeIndex(n))) / 1e6

    steps_total = int(doc["steps"] + doc["warmup_steps"])
    batches = known.training_batches
    doc.update(known.common)
    doc.update(
        {
            "cpu_util_percent": known.cpu_util_percent,
            # The peak only: whether memory leaks is judged once, by the finish (analysis.memory_findings), on every
            # part's samples in steps.csv.
            "memory": {
                "kind": known.mem_kind,
                "peak_bytes": int(sampled_mem.max()) if len(sampled_mem) else None,
                **known.memory_limits,
            },
            **{
                f"compute_split{kind}_ms": {
                    ph: float(ms(f"{ph}{kind}_ms")[training].mean())
                    for ph in ("forward", "backward", "optimizer")
                    if f"{ph}{kind}_ms" in sources and training.any()
                }
                for kind in ("", "_gpu")
            },
            "skipped_boundaries": known.skipped_boundaries,
            "batches_per_step": (batches / steps_total) if batches and steps_total else None,
            "scaler_skipped_steps": known.scaler_skipped_steps,
            "startup": startup_summary(
                known.t_start,
                _frame(store, ("start_ns", "wall_ns", "perfcore_ns", "warmup"), evaluation=is_eval),
                known.common["loaders"],
                doc["steps"],
            ),
        }
    )
    if known.backend_note:
        doc["capture"] = {**doc["capture"], "requested_backend": known.requested_backend, "note": known.backend_note}
    if doc["overhead"]:
        doc["overhead"] = overhead_doc(_whole_overhead(doc, known, store, is_eval, training, steps_total))
    # The summaries below read a few columns each: frames of just those, made when asked.
    flags = {"warmup": warmup, "evaluation": is_eval}
    doc.update(
        lines_document(
            known.lines,
            pd.DataFrame({"step": store.column("step"), "load_ms": ms("load_ms"), "wall_ms": ms("wall_ms"), **flags}),
            _frame(store, ("start_ns", "wall_ns", "perfcore_ns")),
            *label_spans(engine),
        )
    )
    split = {c: ms(c) for c in ("wall_ms", "forward_ms", "backward_ms", "optimizer_ms") if c in sources}
    doc.update(compute_document(known.optimizer, pd.DataFrame({**split, **flags})))
    del split
    notes = [*known.notes, *engine.notes]
    if notes:
        doc["notes"] = list(dict.fromkeys(notes))
    _write_csv(part / "steps.csv", engine, is_eval, mem)
    _write_trace(engine, store.column("start_ns"), store.column("wall_ns"), part, trace_arrays(known.lines))
    jsonio.write(part / "run.json", doc)


def _whole_overhead(doc, known: PartFacts, store, is_eval, training, steps_total: int) -> Overhead:
    """The timer's phases and own work (the recording's figures, as its document holds them), plus the run's
    wrappers and line sampler (a part from before these were counted has no own costs: its estimate still
    says the hooks are not included)."""
    timer = from_doc(Overhead, doc["overhead"], "overhead")
    costs = known.own_costs
    if costs is None or costs.error is not None:
        return dataclasses.replace(timer, hooks="not included")
    lines, share = known.lines, None
    if lines is not None:
        # A step's span holds its own work (as the samples' join takes it).
        start = np.asarray(store.column("start_ns"), np.int64)
        end = start + np.asarray(store.column("wall_ns"), np.int64) + np.asarray(store.column("perfcore_ns"))
        share = sampler_share(lines, start[training], end[training])
    costs = dataclasses.replace(costs, sampler_ns=lines.sampler_ns if lines else 0.0, sampler_share=share)
    # Over every step its costs were counted in (warm-up too); the typical step apart (none without a
    # measured step).
    wall_ns = np.asarray(store.column("wall_ns"))[~is_eval]
    whole_ms = float(wall_ns.sum(dtype=np.float64)) / 1e6 / max(1, len(wall_ns))
    step = doc["step_time_ms"]
    return beside_steps(timer, costs, steps_total, whole_ms, step.get("robust"))


def _frame(store, names, **more):
    import pandas as pd

    return pd.DataFrame({**{c: store.column(c) for c in names}, **more}, copy=False)


def _summary_frame(store, is_eval: np.ndarray):
    """The columns the run's summary reads (recording.document.summary_columns), in ns: it makes each
    ms column when it reads it. perfcore_ns too: the summary's own-work figures."""
    ns = ["step", "warmup", "wall_ns", *(f"{lb}_ns" for lb in LABELS), "perfcore_ns"]
    return _frame(store, ns, **({"evaluation": is_eval} if is_eval.any() else {}))


def _write_csv(path: Path, engine, is_eval: np.ndarray, mem: np.ndarray) -> None:
    """steps.csv as the whole table's to_csv would write it, made and written CSV_SLICE rows at a time."""
    from perfcore.recording.document import ms_table
    from perfcore.recording.engine import FIRST_CUSTOM

    store, n = engine.store, engine.store.settled
    with jsonio.atomic_path(Path(path)) as tmp, open(tmp, "w", newline="") as fh:
        for since in range(0, max(n, 1), CSV_SLICE):
            upto = min(n, since + CSV_SLICE)
            _, view = ms_table(store.table(since, upto), engine.phases.names, FIRST_CUSTOM)
            view["evaluation"] = is_eval[since:upto]
            view["mem_bytes"] = mem[since:upto]
            view.to_csv(fh, index=False, header=since == 0)


def _evaluation(rows: list[int], passes: list, store) -> dict[str, Any] | None:
    """Evaluation rows (rows: those the run settled), summed apart."""
    seen = {"passes": len(passes), "total_ms": sum(b - a for a, b in passes) / 1e6}
    if not rows:
        return {**seen, "apart": False} if passes else None
    return {**seen, "rows": rows, "rows_ms": float(store.column("wall_ns")[rows].sum() / 1e6), "apart": True}


def startup_summary(t_start: int, full, loaders: list[dict[str, Any]], measured: int) -> dict[str, Any]:
    """Time to the first step's end from interpreter start, the first step against steady state,
    and the training DataLoader's first-epoch worker start-up."""
    # Columns as arrays, rows chosen by one mask: selecting rows of the whole table copies every column.
    wall_ns = full["wall_ns"].to_numpy()
    own = int(full["perfcore_ns"].iat[0]) if "perfcore_ns" in full else 0
    first_end_ns = int(full["start_ns"].iat[0]) + int(wall_ns[0]) + own  # wall leaves perfcore's work out
    steady = np.ones(len(full), dtype=bool)
    steady[0] = False  # steady state: never the first step itself (a one-step run has none)
    # A run that ended in warm-up has no steady step: its warm-up steps are not one (every output reads this).
    steady &= ~full["warmup"].to_numpy(dtype=bool) if measured else False
    if "evaluation" in full:
        steady &= ~full["evaluation"].to_numpy(dtype=bool)
    starts = [s for ld in loaders if ld["training"] for s in ld["worker_startup_ms"]]
    starts = starts or [s for ld in loaders for s in ld["worker_startup_ms"]]
    return {
        "time_to_first_step_ms": (first_end_ns - t_start) / 1e6,
        "first_step_ms": float(wall_ns[0] / 1e6),
        "steady_step_ms": float(np.median(wall_ns[steady]) / 1e6) if steady.any() else None,
        "worker_startup_ms": float(starts[0]) if starts else None,
        "worker_startup_total_ms": float(sum(starts)) if starts else None,
    }


def _write_trace(engine, start_ns, wall_ns, part, lines: dict[str, Any]) -> None:
    detail = engine.trace_tables()  # the kept steps' detail: bounded however long the run
    spans = detail["spans"]
    names = engine.phase_names()
    # Strings go in as fixed-width unicode arrays: np.load(allow_pickle=False) must read them back.
    raw: dict[str, Any] = {
        "span_phase": spans["phase_id"].to_numpy(),
        "span_start_ns": spans["start_ns"].to_numpy(),
        "span_end_ns": spans["end_ns"].to_numpy(),
        "span_thread": spans["thread_id"].to_numpy(),
        "span_step": spans["step"].to_numpy(),
        "phase_ids": np.array(list(names), dtype=np.int32),
        "phase_names": np.array(list(names.values()), dtype=str),
        "step_start_ns": start_ns,
        "step_wall_ns": wall_ns,
    }
    # Which steps those intervals cover, and the cap that bounded them (the trace says so).
    # Imported here, not at the top: a process that never imported torch writes its part at
    # interpreter shutdown, when pandas (which the engine brings) can no longer be imported.
    from perfcore.recording.engine import detail_steps

    kept = detail_steps(engine)
    raw.update(
        detail_through=np.int64(kept["through"]),
        detail_settled=np.int64(kept["settled"]),
        detail_window=np.array(kept["window"], dtype=np.int64),
        detail_cap_steps=np.int64(kept["cap_steps"]),
        detail_cap_rows=np.int64(kept["cap_rows"]),
    )
    k, c, ev = detail["kernels"], detail["copies"], detail["events"]
    if len(k):
        raw.update(
            kernel_start_ns=k["start_ns"].to_numpy(),
            kernel_end_ns=k["end_ns"].to_numpy(),
            kernel_stream=k["stream_id"].to_numpy(),
            kernel_name=k["name"].to_numpy(dtype=str),
        )
    m = c[c["kind"] == "memcpy"]
    if len(m):
        raw.update(
            memcpy_start_ns=m["start_ns"].to_numpy(),
            memcpy_end_ns=m["end_ns"].to_numpy(),
            memcpy_stream=m["stream_id"].to_numpy(),
            memcpy_bytes=m["size_bytes"].to_numpy(),
            memcpy_direction=m["direction"].to_numpy(dtype=str),
            memcpy_pageable=m["pageable"].to_numpy(),
        )
    if len(ev) and not engine.kernels_traced:
        raw.update(
            event_phase=ev["phase_id"].to_numpy(),
            event_start_ns=ev["start_ns"].to_numpy(),
            event_end_ns=ev["end_ns"].to_numpy(),
        )
    raw.update(lines)  # the host-line samples, for the trace's training-thread track
    with jsonio.atomic_path(part / "trace.npz") as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **raw)  # a file object: given a path, numpy would append ".npz" to it
