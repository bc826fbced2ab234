"""StepStore: what a StepTimer keeps, bounded however long the run.

Raw intervals (host spans, CUDA-event intervals, CUPTI kernels and copies) stay only until their
steps are settled. Settling (every 1024 steps at most, in passes of SETTLE_SLICE steps) turns them
into one row per step (the one definition, in attribution.step_table) and into aggregates (kernel
time by name, copies by direction); full detail is kept for the steps analysis.detail chooses (every
step up to a cap, then a window), which is what a trace needs. The rows
themselves go to a temporary file block by block (analysis.spill). So memory is flat however long the run.

Settling works on plain columns (analysis.columns), never pandas: it runs on the training thread, and
pandas' first import there stopped the script's loop for 0.3-2.5 s. Only the readers' views (table(),
trace_tables()) build DataFrames.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfcore.analysis import attribution
from perfcore.analysis.columns import Cols, as_cols, concat, empty, frame, nrows, sorted_unique, take
from perfcore.analysis.detail import DetailSteps
from perfcore.analysis.spill import Columns

__all__ = ["StepStore", "EMPTY", "memcpy_document"]

EMPTY = {
    "spans": {"phase_id": np.int32, "step": np.int64, "start_ns": np.int64, "end_ns": np.int64, "thread_id": np.int64},
    "events": {"phase_id": np.int32, "step": np.int64, "start_ns": np.int64, "end_ns": np.int64},
    "kernels": {
        "start_ns": np.int64,
        "end_ns": np.int64,
        "stream_id": np.int32,
        "name": object,
        "comm": bool,
        "phase_id": np.int32,
    },
    "copies": {
        "start_ns": np.int64,
        "end_ns": np.int64,
        "stream_id": np.int32,
        "size_bytes": np.int64,
        "direction": object,
        "pageable": bool,
        "kind": object,
    },
}


class _EmptyUntilSet(dict):
    # A table's kept detail: no rows until some are set (a recording that never settles keeps none).
    def __missing__(self, table: str) -> Cols:
        return empty(EMPTY[table])


def _concat(parts: list[Cols], table: str) -> Cols:
    return concat(parts, EMPTY[table])


SETTLE_SLICE = 4096  # steps attributed per pass: the passes' temporaries, not the run's length, set the peak
# The columns every settled step keeps (host is derived: wall less the other four, exactly; wall excludes perfcore_ns).
ROW_COLUMNS = ("start_ns", "wall_ns", "load_ns", "transfer_ns", "compute_ns", "comm_ns", "perfcore_ns")


def _union_shared(spans: Cols, shared: set[int]) -> Cols:
    """spans with those of the shared phase ids cut to their union per (phase, thread): each starts
    no earlier than the latest end before it, so a span inside another of the same id lasts 0."""
    sel = np.isin(spans["phase_id"], list(shared))
    if not sel.any():
        return spans
    mine = take(spans, sel)
    mine = take(mine, np.lexsort((mine["start_ns"], mine["thread_id"], mine["phase_id"])))  # stable
    pid, tid, start, end = mine["phase_id"], mine["thread_id"], mine["start_ns"], mine["end_ns"]
    cut = np.flatnonzero(np.r_[True, (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])]).tolist() + [len(pid)]
    before = np.full(len(pid), np.iinfo(np.int64).min, dtype=np.int64)
    for g0, g1 in zip(cut[:-1], cut[1:]):  # one pass per (phase, thread) pair: a handful, not per span
        before[g0 + 1 : g1] = np.maximum.accumulate(end[g0:g1])[:-1]
    mine["start_ns"] = np.minimum(np.maximum(start, before), end)
    return concat([take(spans, ~sel), mine], spans)


class StepStore:
    def __init__(self, labels: dict[int, str], first_custom: int, on_gpu: bool, use_kernels: bool, warmup: int):
        self.labels = labels  # phase id -> label (shared with the timer, which adds custom phases)
        self.first_custom = first_custom
        # Phase ids that many names share (the names past the recording's limit): a name nested in
        # another of them must not count twice, so their time per step is a union per thread.
        self.shared_phase_ids: set[int] = set()
        self.on_gpu = on_gpu
        self.use_kernels = use_kernels
        # CUPTI given up mid-run (to torch.profiler): the event intervals label the GPU from then on.
        self.events_from_ns: int | None = None
        # Kernel tracing's cost, kept out of each settled step (recording/tracing.py): keep_out(raw, columns, s0, s1).
        self.tracing = None
        self.warmup = warmup
        self.precedence = attribution.PRECEDENCE if on_gpu else attribution.CPU_PRECEDENCE
        self.pending: dict[str, list[Cols]] = {t: [] for t in EMPTY}
        self.detail: dict[str, Cols] = _EmptyUntilSet()
        self.rows = Columns()
        self.settled = 0
        self.t0: int | None = None
        self.last_end = 0  # end of the last settled step (the next one starts there)
        self.kernel_agg: dict[str, list[int]] = {}  # name -> [count, total ns]
        self.copy_agg: dict[str, dict[str, int]] = {}  # direction -> count, bytes, ns, pageable_bytes
        self.span_count = 0
        self.keep = DetailSteps()  # which settled steps keep their intervals
        # Running sums over the settled measured steps: what a live view needs, O(1) to read.
        self.measured = 0
        self.wall_ns = 0
        self.label_ns = {lb: 0 for lb in attribution.LABELS}

    def add(self, table: str, df) -> None:
        """Intervals (a DataFrame or a mapping of columns) into the table's pending rows."""
        cols = as_cols(df)
        if nrows(cols):
            self.pending[table].append(cols)
            if table == "spans":
                self.span_count += int((cols["phase_id"] != attribution.OWN_PHASE_ID).sum())  # the timed phases

    def _tables(self) -> dict[str, Cols]:
        for t in EMPTY:  # fold the parts once, so settle() works on one frame per table
            self.pending[t] = [_concat(self.pending[t], t)]
        return {t: self.pending[t][0] for t in EMPTY}

    def _label_codes(self, phase_ids: np.ndarray) -> np.ndarray:
        """Phase ids -> the index of their label in LABELS (-1: unknown), with integers only: mapping
        to label strings would make pandas build a string column (pyarrow-backed in pandas 3, whose
        allocator keeps tens of MB of the user's process after the first use)."""
        lut = np.full(max(self.labels, default=0) + 1, -1, dtype=np.int8)
        for pid, lb in self.labels.items():
            lut[pid] = attribution.LABELS.index(lb)
        ids = np.asarray(phase_ids, dtype=np.int64)
        ok = (ids >= 0) & (ids < len(lut))
        out = np.full(len(ids), -1, dtype=np.int8)
        out[ok] = lut[ids[ok]]
        return out

    def intervals(self, raw) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Labelled intervals of raw tables (columns or DataFrames), as attribution takes them."""
        spans = as_cols(raw["spans"])
        label_of = self._label_codes(spans["phase_id"])
        host_labels = ("load",) if self.on_gpu else ("load", "transfer", "compute", "comm")
        own = spans["phase_id"] == attribution.OWN_PHASE_ID
        iv = {attribution.OWN: (spans["start_ns"][own], spans["end_ns"][own])}
        for lb in host_labels:
            sel = label_of == attribution.LABELS.index(lb)
            iv[lb] = (spans["start_ns"][sel], spans["end_ns"][sel])
        if not self.on_gpu:
            return iv
        if self.use_kernels:
            k, c = as_cols(raw["kernels"]), as_cols(raw["copies"])
            comm = k["comm"].astype(bool)
            iv["compute"] = (k["start_ns"][~comm], k["end_ns"][~comm])
            iv["comm"] = (k["start_ns"][comm], k["end_ns"][comm])
            iv["transfer"] = (c["start_ns"], c["end_ns"])
        if not self.use_kernels or self.events_from_ns is not None:
            ev = as_cols(raw["events"])
            ev_label = self._label_codes(ev["phase_id"])
            a, e = ev["start_ns"], ev["end_ns"]
            after = self.events_from_ns if self.use_kernels else None
            for lb in ("compute", "transfer", "comm"):
                sel = ev_label == attribution.LABELS.index(lb)
                ea, ee = a[sel], e[sel]
                if after is not None:  # kernels label the time before the hand-over, events the time after
                    keep = ee > after
                    ea, ee = np.maximum(ea[keep], after), ee[keep]
                    ea, ee = np.concatenate([iv[lb][0], ea]), np.concatenate([iv[lb][1], ee])
                iv[lb] = (ea, ee)
        return iv

    def settle(self, ends, upto: int, t_first: int, first: int = 0) -> None:
        """Attribute steps [settled, upto) and let go of the raw intervals that end inside them.
        ends[i] is the end of step first + i (the caller may pass only the ends not yet settled)."""
        if upto <= self.settled:
            return
        ends = np.asarray(ends, dtype=np.int64)
        if first > self.settled or first + len(ends) < upto:
            raise ValueError(
                f"settle: ends of steps [{first}, {first + len(ends)}) do not cover [{self.settled}, {upto})"
            )
        while self.settled < upto:
            stop = min(upto, self.settled + SETTLE_SLICE)
            self._settle_slice(ends[self.settled - first : stop - first], t_first)

    def _settle_slice(self, s1: np.ndarray, t_first: int) -> None:
        raw = self._tables()
        if self.t0 is None:
            first = raw["spans"]["start_ns"][raw["spans"]["step"] == 0]
            self.t0 = min(int(first.min()) if len(first) else t_first, t_first, int(s1[0]))
            self.last_end = self.t0
        s0 = np.concatenate([[self.last_end], s1[:-1]])
        upto = self.settled + len(s1)
        iv = {lb: self._within(a, e, int(s0[0]), int(s1[-1])) for lb, (a, e) in self.intervals(raw).items()}
        df = attribution.step_columns(
            s0, s1, iv, warmup=self.warmup, first_step=self.settled, precedence=self.precedence
        )
        if self.tracing is not None:
            self.tracing.keep_out(raw, df, s0, s1)
        extra: dict[str, np.ndarray] = {}
        spans = raw["spans"]
        custom = take(spans, spans["phase_id"] >= self.first_custom)
        if nrows(custom):
            if self.shared_phase_ids:
                custom = _union_shared(custom, self.shared_phase_ids)
            # A span belongs to the step in which it ends (by time, not by its step tag: steps made
            # from batch fetches after the fact never moved the recorder's step counter).
            extra.update(self._per_step(custom, s0, s1, upto, "_phase{}_ns"))
        k = raw["kernels"]
        tagged = take(k, k["phase_id"] >= 0)
        if nrows(tagged):
            # Kernel time per launching phase, each kernel counted in the step where it ends.
            extra.update(self._per_step(tagged, s0, s1, upto, "_gpu{}_ns"))
        self.rows.append({**{c: df[c] for c in ROW_COLUMNS}, **extra}, len(s1))
        m = ~df["warmup"]
        self.measured += int(m.sum())
        self.wall_ns += int(df["wall_ns"][m].sum())
        for lb in attribution.LABELS:
            self.label_ns[lb] += int(df[f"{lb}_ns"][m].sum())
        self._retire(raw, int(s1[-1]), df)
        self.settled = upto
        self.last_end = int(s1[-1])

    @staticmethod
    def _within(a: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        # Only the intervals that touch the slice's steps: later ones wait for their own pass.
        sel = (e > lo) & (a < hi)
        return a[sel], e[sel]

    def _per_step(self, frame: Cols, s0: np.ndarray, s1: np.ndarray, upto: int, name: str) -> dict[str, np.ndarray]:
        """Summed duration per step [settled, upto) and phase id of intervals, each in the step it ends in."""
        end = frame["end_ns"]
        step = np.searchsorted(s1, end, side="left")
        ok = (step < upto - self.settled) & (end > s0[0])
        dur = (end - frame["start_ns"])[ok]
        pid = frame["phase_id"][ok]
        out = {}
        for p in sorted_unique(pid):
            sel = pid == p
            out[name.format(int(p))] = np.bincount(step[ok][sel], weights=dur[sel], minlength=len(s1)).astype(np.int64)
        return out

    def _retire(self, raw: dict[str, Cols], cut: int, df: Cols) -> None:
        self.keep.choose(df, raw, sum(nrows(self.detail[t]) for t in raw))
        for t, rows in raw.items():
            if not nrows(rows):
                self.pending[t] = []
                if nrows(self.detail[t]):
                    self._keep_detail(t, self.detail[t])
                continue
            done = rows["end_ns"] <= cut
            gone = take(rows, done)
            if t == "kernels" and nrows(gone):
                self._add_kernels(gone)
            if t == "copies" and nrows(gone):
                self._add_copies(take(gone, gone["kind"] == "memcpy"))
            self._keep_detail(t, _concat([self.detail[t], gone], t))
            self.pending[t] = [take(rows, ~done)]

    def _add_kernels(self, gone: Cols) -> None:
        names, which = np.unique(gone["name"].astype(str), return_inverse=True)
        total = np.zeros(len(names), dtype=np.int64)
        np.add.at(total, which, gone["end_ns"] - gone["start_ns"])
        for name, count, ns in zip(names.tolist(), np.bincount(which).tolist(), total.tolist()):
            a = self.kernel_agg.setdefault(name, [0, 0])
            a[0] += count
            a[1] += ns

    def _add_copies(self, m: Cols) -> None:
        ns = m["end_ns"] - m["start_ns"]
        pageable = m["pageable"].astype(bool)
        direction = m["direction"].astype(str)
        for d in np.unique(direction).tolist():  # a handful of directions
            sel = direction == d
            a = self.copy_agg.setdefault(d, {"count": 0, "bytes": 0, "ns": 0, "pageable_bytes": 0, "pageable_ns": 0})
            a["count"] += int(sel.sum())
            a["bytes"] += int(m["size_bytes"][sel].sum())
            a["ns"] += int(ns[sel].sum())
            a["pageable_bytes"] += int(m["size_bytes"][sel & pageable].sum())
            a["pageable_ns"] += int(ns[sel & pageable].sum())

    def _keep_detail(self, t: str, kept: Cols) -> None:
        """Of `kept`, only the intervals that overlap a kept step's window stay in detail."""
        if not nrows(kept):
            return
        self.detail[t] = take(kept, self.keep.mask(kept["start_ns"], kept["end_ns"]))

    def table(self, since: int = 0, upto: int | None = None):
        """columns(since, upto) as a pandas DataFrame."""
        return frame(self.columns(since, upto))

    def column_names(self) -> list[str]:
        """The names columns() returns, in its order."""
        names = ["step", "warmup", *ROW_COLUMNS, "host_ns"]
        return names + [c for c in self.rows.names if c not in names]

    def column(self, name: str, since: int = 0, upto: int | None = None) -> np.ndarray:
        """One column of columns(since, upto), read alone: a reader that wants a few columns of a long
        run never holds the whole table."""
        upto = self.rows.n if upto is None else min(max(upto, 0), self.rows.n)
        since = min(max(since, 0), upto)
        if name == "step":
            return np.arange(since, upto, dtype=np.int64)
        if name == "warmup":
            return np.arange(since, upto, dtype=np.int64) < self.warmup
        if name == "host_ns":
            rest = (self.rows.column(f"{lb}_ns", since, upto) for lb in attribution.LABELS if lb != "host")
            return self.rows.column("wall_ns", since, upto) - sum(rest)
        return self.rows.column(name, since, upto)

    def columns(self, since: int = 0, upto: int | None = None) -> Cols:
        """One row per settled step in [since, upto) (upto: every settled step): step, warmup,
        start_ns, wall_ns, <label>_ns (the five sum to wall_ns), and _phase<id>_ns / _gpu<id>_ns
        per custom phase; plain arrays, no pandas."""
        upto = self.rows.n if upto is None else min(max(upto, 0), self.rows.n)
        since = min(max(since, 0), upto)
        step = np.arange(since, upto, dtype=np.int64)
        cols: dict[str, Any] = {"step": step, "warmup": step < self.warmup}
        for c in ROW_COLUMNS:
            cols[c] = self.rows.column(c, since, upto)
        cols["host_ns"] = cols["wall_ns"] - sum(cols[f"{lb}_ns"] for lb in attribution.LABELS if lb != "host")
        for c in self.rows.names:
            if c not in cols:
                cols[c] = self.rows.column(c, since, upto)
        return cols

    def totals(self) -> dict[str, Any]:
        """Settled steps so far and the sums over the measured ones (ns): cheap, for progress lines."""
        return {"settled": self.settled, "measured": self.measured, "wall_ns": self.wall_ns, "ns": dict(self.label_ns)}

    def detail_steps(self) -> dict[str, Any]:
        """Which settled steps the trace tables hold in full (analysis.detail)."""
        return self.keep.summary(self.settled)

    def trace_tables(self) -> dict:
        """Detail of the kept steps plus whatever is not settled yet (for the trace), as DataFrames."""
        pend = self._tables()
        out = {}
        for t in EMPTY:
            both = _concat([self.detail[t], pend[t]], t)
            out[t] = frame(take(both, np.argsort(both["start_ns"], kind="stable")))
        return out

    def top_kernels(self, n: int) -> list[dict[str, Any]]:
        items = sorted(self.kernel_agg.items(), key=lambda kv: kv[1][1], reverse=True)[:n]
        return [
            {
                "name": name,
                "count": c,
                "total_ms": ns / 1e6,
                "mean_us": ns / c / 1e3 if c else 0.0,
                "category": attribution.kernel_category(name),
            }
            for name, (c, ns) in items
        ]

    def kernel_categories(self) -> dict[str, dict[str, float]]:
        by: dict[str, int] = {}
        for name, (_, ns) in self.kernel_agg.items():
            cat = attribution.kernel_category(name)
            by[cat] = by.get(cat, 0) + ns
        total = sum(by.values())
        return {
            c: {"ms": v / 1e6, "share": v / total if total else 0.0}
            for c, v in sorted(by.items(), key=lambda kv: -kv[1])
        }

    def memcpy_summary(self) -> dict[str, Any]:
        if not self.copy_agg:
            return {}
        by = {
            d: {
                "count": a["count"],
                "bytes": a["bytes"],
                "ms": a["ns"] / 1e6,
                "pageable_bytes": a["pageable_bytes"],
                "pageable_ms": a["pageable_ns"] / 1e6,
            }
            for d, a in self.copy_agg.items()
        }
        return memcpy_document(by)


def memcpy_document(by: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """run.json's `memcpy` from its figures by direction (count, bytes, ms, pageable bytes and ms)."""
    total = sum(v["bytes"] for v in by.values())
    pageable = sum(v["pageable_bytes"] for v in by.values())
    return {
        "by_direction": by,
        "bytes": total,
        "pageable_bytes": pageable,
        "pageable_share": pageable / total if total else 0.0,
    }
