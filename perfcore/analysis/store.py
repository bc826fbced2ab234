"""StepStore: what a StepTimer keeps, bounded however long the run.

Raw intervals (host spans, CUDA-event intervals, CUPTI kernels and copies) stay only until their
steps are settled. Settling (every 1024 steps at most, in passes of SETTLE_SLICE steps) turns them
into one row per step (the one definition, in attribution.step_table) and into aggregates (kernel
time by name, copies by direction); full detail is kept for the steps analysis.detail chooses (every
step up to a cap, then a window), which is what a trace needs. The rows
themselves go to a temporary file block by block (analysis.spill). So memory is flat however long the run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfcore._lazy import lazy_module
from perfcore.analysis import attribution
from perfcore.analysis.detail import DetailSteps
from perfcore.analysis.spill import Columns

pd = lazy_module("pandas")  # imported on first use: settling needs it, recording does not

__all__ = ["StepStore", "EMPTY"]

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

_EMPTY_FRAMES: dict[str, pd.DataFrame] = {}


def _empty(table: str) -> pd.DataFrame:
    # Built once: pandas construction costs ~1 ms, and settle() would otherwise pay it per table.
    # Callers never modify frames in place, so sharing one is safe.
    if table not in _EMPTY_FRAMES:
        _EMPTY_FRAMES[table] = pd.DataFrame({c: pd.Series(dtype=t) for c, t in EMPTY[table].items()})
    return _EMPTY_FRAMES[table]


class _EmptyUntilSet(dict):
    # A table's kept detail: the empty frame until one is set (a recording that never settles builds none).
    def __missing__(self, table: str) -> pd.DataFrame:
        return _empty(table)


def _concat(frames: list[pd.DataFrame], table: str) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return _empty(table)
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


SETTLE_SLICE = 4096  # steps attributed per pass: the passes' temporaries, not the run's length, set the peak
# The columns every settled step keeps (host is derived: wall less the other four, exactly; wall excludes perfcore_ns).
ROW_COLUMNS = ("start_ns", "wall_ns", "load_ns", "transfer_ns", "compute_ns", "comm_ns", "perfcore_ns")


def _union_shared(spans: pd.DataFrame, shared: set[int]) -> pd.DataFrame:
    """spans with those of the shared phase ids cut to their union per (phase, thread): each starts
    no earlier than the latest end before it, so a span inside another of the same id lasts 0."""
    sel = np.isin(spans["phase_id"].to_numpy(), list(shared))
    if not sel.any():
        return spans
    mine = spans[sel].sort_values(["phase_id", "thread_id", "start_ns"], kind="stable")
    covered = mine.groupby(["phase_id", "thread_id"], sort=False)["end_ns"].cummax()
    before = covered.groupby([mine["phase_id"], mine["thread_id"]], sort=False).shift(1)
    start = np.maximum(mine["start_ns"].to_numpy(), before.fillna(np.iinfo(np.int64).min).to_numpy(np.int64))
    mine = mine.assign(start_ns=np.minimum(start, mine["end_ns"].to_numpy()))
    return pd.concat([spans[~sel], mine], ignore_index=True)


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
        self.warmup = warmup
        self.precedence = attribution.PRECEDENCE if on_gpu else attribution.CPU_PRECEDENCE
        self.pending: dict[str, list[pd.DataFrame]] = {t: [] for t in EMPTY}
        self.detail: dict[str, pd.DataFrame] = _EmptyUntilSet()  # no frame made before the first settle
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

    def add(self, table: str, df: pd.DataFrame) -> None:
        if len(df):
            self.pending[table].append(df)
            if table == "spans":
                self.span_count += int((df["phase_id"] != attribution.OWN_PHASE_ID).sum())  # the timed phases

    def _tables(self) -> dict[str, pd.DataFrame]:
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

    def intervals(self, raw: dict[str, pd.DataFrame]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        spans = raw["spans"]
        label_of = self._label_codes(spans["phase_id"].to_numpy())
        host_labels = ("load",) if self.on_gpu else ("load", "transfer", "compute", "comm")
        own = spans["phase_id"].to_numpy() == attribution.OWN_PHASE_ID
        iv = {attribution.OWN: (spans["start_ns"].to_numpy()[own], spans["end_ns"].to_numpy()[own])}
        for lb in host_labels:
            sel = label_of == attribution.LABELS.index(lb)
            iv[lb] = (spans["start_ns"].to_numpy()[sel], spans["end_ns"].to_numpy()[sel])
        if not self.on_gpu:
            return iv
        if self.use_kernels:
            k, c = raw["kernels"], raw["copies"]
            comm = k["comm"].to_numpy(dtype=bool)
            iv["compute"] = (k["start_ns"].to_numpy()[~comm], k["end_ns"].to_numpy()[~comm])
            iv["comm"] = (k["start_ns"].to_numpy()[comm], k["end_ns"].to_numpy()[comm])
            iv["transfer"] = (c["start_ns"].to_numpy(), c["end_ns"].to_numpy())
        if not self.use_kernels or self.events_from_ns is not None:
            ev = raw["events"]
            ev_label = self._label_codes(ev["phase_id"].to_numpy())
            a, e = ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy()
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
            first = raw["spans"].loc[raw["spans"]["step"] == 0, "start_ns"]
            self.t0 = min(int(first.min()) if len(first) else t_first, t_first, int(s1[0]))
            self.last_end = self.t0
        s0 = np.concatenate([[self.last_end], s1[:-1]])
        upto = self.settled + len(s1)
        iv = {lb: self._within(a, e, int(s0[0]), int(s1[-1])) for lb, (a, e) in self.intervals(raw).items()}
        df = attribution.step_table(s0, s1, iv, warmup=self.warmup, first_step=self.settled, precedence=self.precedence)
        extra: dict[str, np.ndarray] = {}
        spans = raw["spans"]
        custom = spans[spans["phase_id"] >= self.first_custom]
        if len(custom):
            if self.shared_phase_ids:
                custom = _union_shared(custom, self.shared_phase_ids)
            # A span belongs to the step in which it ends (by time, not by its step tag: steps made
            # from batch fetches after the fact never moved the recorder's step counter).
            extra.update(self._per_step(custom, s0, s1, upto, "_phase{}_ns"))
        k = raw["kernels"]
        tagged = k[k["phase_id"] >= 0]
        if len(tagged):
            # Kernel time per launching phase, each kernel counted in the step where it ends.
            extra.update(self._per_step(tagged, s0, s1, upto, "_gpu{}_ns"))
        self.rows.append({**{c: df[c].to_numpy() for c in ROW_COLUMNS}, **extra}, len(df))
        m = df[~df["warmup"].to_numpy(dtype=bool)]
        self.measured += len(m)
        self.wall_ns += int(m["wall_ns"].sum())
        for lb in attribution.LABELS:
            self.label_ns[lb] += int(m[f"{lb}_ns"].sum())
        self._retire(raw, int(s1[-1]), df)
        self.settled = upto
        self.last_end = int(s1[-1])

    @staticmethod
    def _within(a: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        # Only the intervals that touch the slice's steps: later ones wait for their own pass.
        sel = (e > lo) & (a < hi)
        return a[sel], e[sel]

    def _per_step(
        self, frame: pd.DataFrame, s0: np.ndarray, s1: np.ndarray, upto: int, name: str
    ) -> dict[str, np.ndarray]:
        """Summed duration per step [settled, upto) and phase id of intervals, each in the step it ends in."""
        end = frame["end_ns"].to_numpy()
        step = np.searchsorted(s1, end, side="left")
        ok = (step < upto - self.settled) & (end > s0[0])
        dur = (end - frame["start_ns"].to_numpy())[ok]
        pid = frame["phase_id"].to_numpy()[ok]
        out = {}
        for p in np.unique(pid):
            sel = pid == p
            out[name.format(int(p))] = np.bincount(step[ok][sel], weights=dur[sel], minlength=len(s1)).astype(np.int64)
        return out

    def _retire(self, raw: dict[str, pd.DataFrame], cut: int, df: pd.DataFrame) -> None:
        self.keep.choose(df, raw, sum(len(self.detail[t]) for t in raw))
        for t, frame in raw.items():
            if not len(frame):
                # Nothing to retire. (Filtering the shared empty frame would leave a copy-on-write
                # reference on it every settle: pandas keeps those, so memory would creep.)
                self.pending[t] = []
                if len(self.detail[t]):
                    self._keep_detail(t, self.detail[t])
                continue
            done = frame["end_ns"].to_numpy() <= cut
            gone = frame[done]
            if t == "kernels" and len(gone):
                g = (gone["end_ns"] - gone["start_ns"]).groupby(gone["name"]).agg(["count", "sum"])
                for name, row in g.iterrows():
                    a = self.kernel_agg.setdefault(str(name), [0, 0])
                    a[0] += int(row["count"])
                    a[1] += int(row["sum"])
            if t == "copies" and len(gone):
                m = gone[gone["kind"] == "memcpy"]
                for d, grp in m.groupby("direction"):
                    a = self.copy_agg.setdefault(
                        str(d), {"count": 0, "bytes": 0, "ns": 0, "pageable_bytes": 0, "pageable_ns": 0}
                    )
                    a["count"] += len(grp)
                    a["bytes"] += int(grp["size_bytes"].sum())
                    a["ns"] += int((grp["end_ns"] - grp["start_ns"]).sum())
                    pg = grp[grp["pageable"]]
                    a["pageable_bytes"] += int(pg["size_bytes"].sum())
                    a["pageable_ns"] += int((pg["end_ns"] - pg["start_ns"]).sum())
            self._keep_detail(t, _concat([self.detail[t], gone], t))
            self.pending[t] = [frame[~done].reset_index(drop=True)]

    def _keep_detail(self, t: str, kept: pd.DataFrame) -> None:
        """Of `kept`, only the intervals that overlap a kept step's window stay in detail."""
        if not len(kept):
            return
        self.detail[t] = kept[self.keep.mask(kept["start_ns"].to_numpy(), kept["end_ns"].to_numpy())].reset_index(
            drop=True
        )

    def table(self, since: int = 0, upto: int | None = None) -> pd.DataFrame:
        """One row per settled step in [since, upto) (upto: every settled step): step, warmup,
        start_ns, wall_ns, <label>_ns (the five sum to wall_ns), and _phase<id>_ns / _gpu<id>_ns
        per custom phase."""
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
        return pd.DataFrame(cols)

    def totals(self) -> dict[str, Any]:
        """Settled steps so far and the sums over the measured ones (ns): cheap, for progress lines."""
        return {"settled": self.settled, "measured": self.measured, "wall_ns": self.wall_ns, "ns": dict(self.label_ns)}

    def detail_steps(self) -> dict[str, Any]:
        """Which settled steps the trace tables hold in full (analysis.detail)."""
        return self.keep.summary(self.settled)

    def trace_tables(self) -> dict[str, pd.DataFrame]:
        """Detail of the kept steps plus whatever is not settled yet (for the trace)."""
        pend = self._tables()
        return {
            t: _concat([self.detail[t], pend[t]], t).sort_values("start_ns", kind="stable").reset_index(drop=True)
            for t in EMPTY
        }

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
        total = sum(v["bytes"] for v in by.values())
        pageable = sum(v["pageable_bytes"] for v in by.values())
        return {
            "by_direction": by,
            "bytes": total,
            "pageable_bytes": pageable,
            "pageable_share": pageable / total if total else 0.0,
        }
