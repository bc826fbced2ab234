"""StepStore: what a StepTimer keeps, bounded however long the run.

Raw intervals (host spans, CUDA-event intervals, CUPTI kernels and copies) stay only until their
steps are settled. Settling (every 1024 steps) turns them into one row per step (the one definition, in
attribution.step_table) and into aggregates (kernel time by name, copies by direction); full
detail is kept only for a window of steps: the first, the slowest so far, and the median and last
of the latest chunk, which is what a trace needs. So memory is flat over 100k steps.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from perfcore.analysis import attribution

__all__ = ["StepStore", "Columns", "EMPTY", "with_columns"]

EMPTY = {
    "spans": {"phase_id": np.int32, "step": np.int64, "start_ns": np.int64, "end_ns": np.int64, "thread_id": np.int64},
    "events": {"phase_id": np.int32, "step": np.int64, "start_ns": np.int64, "end_ns": np.int64},
    "kernels": {"start_ns": np.int64, "end_ns": np.int64, "stream_id": np.int32, "name": object, "comm": bool,
                "phase_id": np.int32},
    "copies": {"start_ns": np.int64, "end_ns": np.int64, "stream_id": np.int32, "size_bytes": np.int64,
               "direction": object, "pageable": bool, "kind": object},
}


_EMPTY_FRAMES: dict[str, pd.DataFrame] = {}


def _empty(table: str) -> pd.DataFrame:
    # Built once: pandas construction costs ~1 ms, and settle() would otherwise pay it per table.
    # Callers never modify frames in place, so sharing one is safe.
    if table not in _EMPTY_FRAMES:
        _EMPTY_FRAMES[table] = pd.DataFrame({c: pd.Series(dtype=t) for c, t in EMPTY[table].items()})
    return _EMPTY_FRAMES[table]


def _concat(frames: list[pd.DataFrame], table: str) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return _empty(table)
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


BLOCK_ROWS = 16384  # rows per block of a settled column (128 KiB of int64: its own mapping, freed whole)
# The columns every settled step keeps (host is derived: wall less the other four, exactly).
ROW_COLUMNS = ("start_ns", "wall_ns", "load_ns", "transfer_ns", "compute_ns", "comm_ns")


class Columns:
    """Settled per-step columns in fixed-size int64 blocks: appending never copies earlier rows and
    leaves no freed fragments behind, so memory is the rows themselves (8 bytes a value). A column
    first seen late (a custom phase used from step 5000 on) reads 0 for the earlier rows."""

    def __init__(self) -> None:
        self.blocks: dict[str, list[np.ndarray]] = {}
        self.n = 0

    def append(self, values: dict[str, np.ndarray], k: int) -> None:
        for name in values:
            self.blocks.setdefault(name, [])
        for name, blocks in self.blocks.items():
            v = values.get(name)
            pos, i = self.n, 0
            while i < k:
                b, off = divmod(pos, BLOCK_ROWS)
                while b >= len(blocks):
                    blocks.append(np.zeros(BLOCK_ROWS, dtype=np.int64))
                take = min(k - i, BLOCK_ROWS - off)
                if v is not None:
                    blocks[b][off:off + take] = v[i:i + take]
                pos, i = pos + take, i + take
        self.n += k

    def column(self, name: str) -> np.ndarray:
        blocks = self.blocks.get(name) or [np.zeros(0, dtype=np.int64)]
        return np.concatenate(blocks)[: self.n]


class StepStore:
    def __init__(self, labels: dict[int, str], first_custom: int, on_gpu: bool, use_kernels: bool, warmup: int):
        self.labels = labels  # phase id -> label (shared with the timer, which adds custom phases)
        self.first_custom = first_custom
        self.on_gpu = on_gpu
        self.use_kernels = use_kernels
        self.warmup = warmup
        self.precedence = attribution.PRECEDENCE if on_gpu else attribution.CPU_PRECEDENCE
        self.pending: dict[str, list[pd.DataFrame]] = {t: [] for t in EMPTY}
        self.detail: dict[str, pd.DataFrame] = {t: _empty(t) for t in EMPTY}
        self.rows = Columns()
        self.settled = 0
        self.t0: int | None = None
        self.kernel_agg: dict[str, list[int]] = {}  # name -> [count, total ns]
        self.copy_agg: dict[str, dict[str, int]] = {}  # direction -> count, bytes, ns, pageable_bytes
        self.span_count = 0
        self.keep: dict[int, tuple[int, int]] = {}  # step kept in detail -> its [start, end)
        self.slowest: tuple[int, int] | None = None  # (wall ns, step)
        # Running sums over the settled measured steps: what a live view needs, O(1) to read.
        self.measured = 0
        self.wall_ns = 0
        self.label_ns = {lb: 0 for lb in attribution.LABELS}

    def add(self, table: str, df: pd.DataFrame) -> None:
        if len(df):
            self.pending[table].append(df)
            if table == "spans":
                self.span_count += len(df)

    def _tables(self) -> dict[str, pd.DataFrame]:
        for t in EMPTY:  # fold the parts once, so settle() works on one frame per table
            self.pending[t] = [_concat(self.pending[t], t)]
        return {t: self.pending[t][0] for t in EMPTY}

    def _intervals(self, raw: dict[str, pd.DataFrame]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        spans = raw["spans"]
        label_of = spans["phase_id"].map(self.labels).to_numpy()
        host_labels = ("load",) if self.on_gpu else ("load", "transfer", "compute", "comm")
        iv = {}
        for lb in host_labels:
            sel = label_of == lb
            iv[lb] = (spans["start_ns"].to_numpy()[sel], spans["end_ns"].to_numpy()[sel])
        if not self.on_gpu:
            return iv
        if self.use_kernels:
            k, c = raw["kernels"], raw["copies"]
            comm = k["comm"].to_numpy(dtype=bool)
            iv["compute"] = (k["start_ns"].to_numpy()[~comm], k["end_ns"].to_numpy()[~comm])
            iv["comm"] = (k["start_ns"].to_numpy()[comm], k["end_ns"].to_numpy()[comm])
            iv["transfer"] = (c["start_ns"].to_numpy(), c["end_ns"].to_numpy())
        else:
            ev = raw["events"]
            ev_label = ev["phase_id"].map(self.labels).to_numpy()
            for lb in ("compute", "transfer", "comm"):
                sel = ev_label == lb
                iv[lb] = (ev["start_ns"].to_numpy()[sel], ev["end_ns"].to_numpy()[sel])
        return iv

    def settle(self, boundaries: list[int], upto: int, t_first: int) -> None:
        """Attribute steps [settled, upto) and let go of the raw intervals that end inside them."""
        if upto <= self.settled:
            return
        raw = self._tables()
        b = np.asarray(boundaries[:upto], dtype=np.int64)
        if self.t0 is None:
            first = raw["spans"].loc[raw["spans"]["step"] == 0, "start_ns"]
            self.t0 = min(int(first.min()) if len(first) else t_first, t_first, int(b[0]))
        s0 = np.concatenate([[self.t0], b[:-1]])[self.settled:upto]
        s1 = b[self.settled:upto]
        df = attribution.step_table(s0, s1, self._intervals(raw), warmup=self.warmup, first_step=self.settled,
                                    precedence=self.precedence)
        extra: dict[str, np.ndarray] = {}
        spans = raw["spans"]
        custom = spans[spans["phase_id"] >= self.first_custom]
        if len(custom):
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

    def _per_step(self, frame: pd.DataFrame, s0: np.ndarray, s1: np.ndarray, upto: int, name: str
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
        # Which steps keep their detail: the first, the slowest so far, this chunk's median and last.
        walls = df["wall_ns"].to_numpy()
        i_slow = int(np.argmax(walls))
        if self.slowest is None or walls[i_slow] > self.slowest[0]:
            self.slowest = (int(walls[i_slow]), int(df["step"].iloc[i_slow]))
        i_med = int(np.argsort(walls)[len(walls) // 2])
        steps, starts = df["step"].to_numpy(), df["start_ns"].to_numpy()
        windows = {int(k): (int(a), int(a + w)) for k, a, w in zip(steps, starts, walls)}
        want = {0, self.slowest[1], int(df["step"].iloc[i_med]), int(df["step"].iloc[-1])}
        self.keep = {s: (self.keep.get(s) or windows.get(s)) for s in want if (self.keep.get(s) or windows.get(s))}
        for t, frame in raw.items():
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
                    a = self.copy_agg.setdefault(str(d), {"count": 0, "bytes": 0, "ns": 0, "pageable_bytes": 0,
                                                          "pageable_ns": 0})
                    a["count"] += len(grp)
                    a["bytes"] += int(grp["size_bytes"].sum())
                    a["ns"] += int((grp["end_ns"] - grp["start_ns"]).sum())
                    pg = grp[grp["pageable"]]
                    a["pageable_bytes"] += int(pg["size_bytes"].sum())
                    a["pageable_ns"] += int((pg["end_ns"] - pg["start_ns"]).sum())
            kept = _concat([self.detail[t], gone], t)
            mask = np.zeros(len(kept), dtype=bool)
            a, e = kept["start_ns"].to_numpy(), kept["end_ns"].to_numpy()
            for lo, hi in self.keep.values():
                mask |= (a < hi) & (e > lo)
            self.detail[t] = kept[mask].reset_index(drop=True)
            self.pending[t] = [frame[~done].reset_index(drop=True)]

    def table(self) -> pd.DataFrame:
        """One row per settled step: step, warmup, start_ns, wall_ns, <label>_ns (the five sum to
        wall_ns), and _phase<id>_ns / _gpu<id>_ns per custom phase."""
        n = self.rows.n
        step = np.arange(n, dtype=np.int64)
        cols: dict[str, Any] = {"step": step, "warmup": step < self.warmup}
        for c in ROW_COLUMNS:
            cols[c] = self.rows.column(c)
        cols["host_ns"] = cols["wall_ns"] - sum(cols[f"{lb}_ns"] for lb in attribution.LABELS if lb != "host")
        for c in self.rows.blocks:
            if c not in cols:
                cols[c] = self.rows.column(c)
        return pd.DataFrame(cols)

    def totals(self) -> dict[str, Any]:
        """Settled steps so far and the sums over the measured ones (ns): cheap, for progress lines."""
        return {"settled": self.settled, "measured": self.measured, "wall_ns": self.wall_ns, "ns": dict(self.label_ns)}

    def trace_tables(self) -> dict[str, pd.DataFrame]:
        """Detail of the kept steps plus whatever is not settled yet (for the trace)."""
        pend = self._tables()
        return {t: _concat([self.detail[t], pend[t]], t).sort_values("start_ns", kind="stable").reset_index(drop=True)
                for t in EMPTY}

    def top_kernels(self, n: int) -> list[dict[str, Any]]:
        items = sorted(self.kernel_agg.items(), key=lambda kv: kv[1][1], reverse=True)[:n]
        return [{"name": name, "count": c, "total_ms": ns / 1e6, "mean_us": ns / c / 1e3 if c else 0.0,
                 "category": attribution.kernel_category(name)} for name, (c, ns) in items]

    def kernel_categories(self) -> dict[str, dict[str, float]]:
        by: dict[str, int] = {}
        for name, (_, ns) in self.kernel_agg.items():
            cat = attribution.kernel_category(name)
            by[cat] = by.get(cat, 0) + ns
        total = sum(by.values())
        return {c: {"ms": v / 1e6, "share": v / total if total else 0.0}
                for c, v in sorted(by.items(), key=lambda kv: -kv[1])}

    def memcpy_summary(self) -> dict[str, Any]:
        if not self.copy_agg:
            return {}
        by = {d: {"count": a["count"], "bytes": a["bytes"], "ms": a["ns"] / 1e6, "pageable_bytes": a["pageable_bytes"],
                  "pageable_ms": a["pageable_ns"] / 1e6} for d, a in self.copy_agg.items()}
        total = sum(v["bytes"] for v in by.values())
        pageable = sum(v["pageable_bytes"] for v in by.values())
        return {"by_direction": by, "bytes": total, "pageable_bytes": pageable,
                "pageable_share": pageable / total if total else 0.0}


def with_columns(df: pd.DataFrame, columns: dict[str, Any]) -> pd.DataFrame:
    """df plus many new columns at once: one insert per column fragments the frame (pandas warns each
    time), which a run with hundreds of custom phases would print hundreds of times."""
    if not columns:
        return df
    return pd.concat([df.drop(columns=[c for c in columns if c in df]), pd.DataFrame(columns, index=df.index)], axis=1)

