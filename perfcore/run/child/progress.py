"""A run while it happens, written by the child: every ~2 s a small progress file (steps, recent step
time, shares, verdict), every ~30 s a checkpoint of the results so far (run.json + the steps settled
so far, appended), both written atomically, so a run killed with SIGKILL still leaves valid results.
The status line that reads the progress file is run/status.py.

The tick is one clock read between writes; the checkpoint appends only the rows settled since the last one,
as whole nanoseconds in binary (steps.i64): formatting them as CSV text cost ~4 us a row on the training thread,
~2% of a 0.25 ms loop's time once checkpoints come every 30 s.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.reader import CHECKPOINT_TABLE  # the checkpoint's rows: int64, row-major, columns in run.json
from perfcore.run.protocol import (
    CHECKPOINT_EVERY_S,
    PROGRESS_EVERY_S,
    checkpoint_dir,
    progress_file,
)

__all__ = ["ProgressWriter", "ns_columns"]
CHECKPOINT_SLICE = 16384  # rows a checkpoint writes at a time (their int64 block is held at once: 8 B a cell)
# Settling is the costliest part of a tick (~20 ms for a few steps on a loaded 2-core machine, pandas'
# fixed cost, against ~4 ms for the verdict and ~4 ms for the write), and it stalls the training thread:
# the live view's breakdown may lag this much; the step count and recent step time never lag.
SETTLE_EVERY_S = 10.0


def _write_atomic(path: Path, text: str) -> None:
    from perfcore import jsonio

    jsonio.write_text(path, text, durable=False)


def _decide(breakdown_ms: dict[str, float], step_ms: float, on_gpu: bool):
    from perfcore.analysis.verdict import avoidable, decide

    return decide(avoidable(breakdown_ms), step_ms, on_gpu=on_gpu, compute_ms=breakdown_ms["compute"])


class ProgressWriter:
    """Child side, one per instrumented process. Call tick(timer) after step ends (it returns at once
    unless a write is due); checkpoint(timer) is also called by tick every CHECKPOINT_EVERY_S."""

    def __init__(
        self,
        run_dir: Path,
        key: str,
        *,
        steps_wanted: int = 0,
        warmup: int = 0,
        on_gpu: bool = False,
        clock: Callable[[], float] = time.monotonic,
        checkpoint_s: float = CHECKPOINT_EVERY_S,
        extra_s: float = 0.0,
    ):
        self.run_dir, self.key = Path(run_dir), key
        self.steps_wanted, self.warmup, self.on_gpu = steps_wanted, warmup, on_gpu
        self.clock, self.checkpoint_s = clock, checkpoint_s
        t = clock()
        self.t_start, self.next_at, self.next_checkpoint = t, t + PROGRESS_EVERY_S, t + checkpoint_s
        self.next_settle = t + SETTLE_EVERY_S
        self._verdict: tuple[int, dict[str, Any]] | None = None  # (settled steps, the verdict on them)
        self.rows_written = 0
        self.columns: list[str] | None = None
        self.failed: str | None = None  # a write that failed once is not retried every tick
        self.extra_s = extra_s  # tests: a tick made this much slower, as a loaded machine makes it

    def tick(self, timer) -> None:
        t = self.clock()
        if t < self.next_at or self.failed:
            return
        self.next_at = t + PROGRESS_EVERY_S
        try:
            # The live view shows steps and step time from the first tick, the breakdown from the first
            # settle (SETTLE_EVERY_S in): a run over by then is settled by the parent, never here.
            if t >= min(self.next_settle, self.next_checkpoint):
                self.next_settle = t + SETTLE_EVERY_S
                timer.engine.upkeep(len(timer.engine.boundaries))  # settles the steps ended so far, when due
            self.write_progress(timer, t)
            if self.extra_s:
                time.sleep(self.extra_s)
            if t >= self.next_checkpoint:
                self.next_checkpoint = t + self.checkpoint_s
                self.checkpoint(timer)
        except Exception as e:  # never into the training loop
            self.failed = f"{type(e).__name__}: {e}"

    def snapshot(self, timer, t: float | None = None) -> dict[str, Any]:
        """What the status line shows: steps, recent step time, the settled steps' shares and verdict."""
        t = self.clock() if t is None else t
        b = timer.engine.boundaries
        n = len(b)
        k = min(n - 1, 256)
        recent_ms = (b[-1] - b[-1 - k]) / k / 1e6 if k > 0 else None
        store = timer.engine.settled_totals()
        doc: dict[str, Any] = {
            "schema": "perfcore.progress/1",
            "pid": os.getpid(),
            "key": self.key,
            "steps": n,
            "warmup": self.warmup,
            "steps_wanted": self.steps_wanted,
            "elapsed_s": t - self.t_start,
            "step_ms": recent_ms,
            "time_ns": time.time_ns(),
        }
        if store and store["measured"]:
            bd = {lb: store["ns"][lb] / store["measured"] / 1e6 for lb in LABELS}
            step_ms = store["wall_ns"] / store["measured"] / 1e6
            doc["breakdown_ms"] = bd
            doc["breakdown_fraction"] = {lb: (bd[lb] / step_ms if step_ms else 0.0) for lb in LABELS}
            doc["settled_steps"] = store["settled"]
            if self._verdict is None or self._verdict[0] != store["settled"]:  # decided again only on new rows
                from perfcore.report.words.verdict import verdict_short

                v = _decide(bd, step_ms, self.on_gpu)
                said = {"bound": v.bound, "level": v.level.value, "summary": verdict_short(v)}
                self._verdict = (store["settled"], said)
            doc["verdict"] = self._verdict[1]
        return doc

    def write_progress(self, timer, t: float | None = None) -> dict[str, Any]:
        doc = self.snapshot(timer, t)
        path = progress_file(self.run_dir, self.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, json.dumps(doc))
        return doc

    def checkpoint(self, timer) -> Path | None:
        """parts/<key>/checkpoint/: steps.i64 with the rows settled since the last checkpoint appended,
        and a run.json that says what the file holds (steps, the bytes it vouches for, backend,
        device). Results for finish_run when the process dies without writing its part (SIGKILL,
        OOM killer); the reader summarises the rows then, in the reading process, so a checkpoint
        costs the training process only its new rows, however long the run."""
        totals = timer.engine.settled_totals()
        settled = int(totals["settled"])
        if not settled:
            return None
        from perfcore import jsonio

        names = timer.engine.phase_names()
        kinds = {c: k for c, (k, _) in ns_columns(timer.engine.settled_rows(since=settled), names).items()}
        cols = list(kinds)  # no rows: the columns alone
        if cols != self.columns:  # the first checkpoint, or a custom phase appeared: write the file anew
            self.rows_written = 0
        d = checkpoint_dir(self.run_dir, self.key)
        d.mkdir(parents=True, exist_ok=True)
        with open(d / CHECKPOINT_TABLE, "wb" if self.rows_written == 0 else "ab") as fh:
            # In slices: the first checkpoint of a fast loop may hold 100k rows, held at once they would be
            # a peak the training process keeps (the allocator does not give it back).
            for start in range(self.rows_written, settled, CHECKPOINT_SLICE):
                rows = timer.engine.settled_rows(since=start, upto=min(start + CHECKPOINT_SLICE, settled))
                block = np.column_stack([a for _, a in ns_columns(rows, names).values()]).astype("<i8", copy=False)
                fh.write(block.tobytes())
            fh.flush()
        self.columns, self.rows_written = cols, settled
        measured = int(totals["measured"])
        doc = {
            "schema": "perfcore.run/1",
            "backend": timer.backend,
            "device": "cuda" if self.on_gpu else "cpu",
            "steps": measured,
            "warmup_steps": settled - measured,
            "pid": os.getpid(),
            "rank": int(self.key[4:]) if self.key.startswith("rank") else None,  # as the part is keyed
            # The bytes of steps.i64 this checkpoint vouches for: an append cut short by a kill
            # lies beyond them and is ignored by the reader.
            "argv": [],
            "checkpoint": {
                "steps": settled,
                "written_unix_ns": time.time_ns(),
                # The table's columns as steps.csv names them, each read as "i" (an integer), "ms" (whole ns,
                # said in ms) or "b" (0 or 1: a flag); and the bytes of it this checkpoint vouches for.
                "table": CHECKPOINT_TABLE,
                "columns": cols,
                "kinds": [kinds[c] for c in cols],
                "table_bytes": (d / CHECKPOINT_TABLE).stat().st_size,
            },
            "exit": {"reason": "killed before writing its results", "exception": None},
        }
        jsonio.write(d / "run.json", doc)
        return d


def ns_columns(rows: dict[str, np.ndarray], names: dict[int, str]) -> dict[str, tuple[str, np.ndarray]]:
    """Settled ns columns under steps.csv's names, in its order (step, wall_ms, <label>_ms, perfcore_ms,
    warmup, <phase>_ms), each with its kind: "i" (the step), "ms" (whole ns, said in ms), "b" (the flag)."""
    out = {"step": ("i", rows["step"]), "wall_ms": ("ms", rows["wall_ns"])}
    for lb in LABELS:
        out[f"{lb}_ms"] = ("ms", rows[f"{lb}_ns"])
    if "perfcore_ns" in rows:
        out["perfcore_ms"] = ("ms", rows["perfcore_ns"])
    out["warmup"] = ("b", np.asarray(rows["warmup"], dtype=bool))
    for pid, name in sorted(names.items()):
        col = f"_phase{pid}_ns"
        if col in rows:
            out[f"{name}_ms"] = ("ms", rows[col])
    return out
