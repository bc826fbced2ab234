"""A run while it happens. Child side: every ~2 s a small progress file (steps, recent step time,
shares, verdict), every ~30 s a checkpoint of the results so far (run.json + the steps settled so
far, appended), both written atomically, so a run killed with SIGKILL still leaves valid results.
Parent side: a status line on stderr, refreshed from the progress file, when stderr is a terminal.

Both sides are cheap: the child's tick is one clock read between writes; the checkpoint appends only
the rows settled since the last one.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from perfcore.analysis.attribution import LABELS

__all__ = ["ProgressWriter", "LiveStatus", "NotebookStatus", "read_progress", "status_text", "rows_to_table",
           "PROGRESS_EVERY_S", "CHECKPOINT_EVERY_S"]

PROGRESS_EVERY_S = 2.0
CHECKPOINT_EVERY_S = 30.0
CHECKPOINT_SLICE = 1024  # rows a checkpoint formats at a time (to_csv holds their text at once)


def _write_atomic(path: Path, text: str) -> None:
    from perfcore.report import jsonio

    jsonio.write_text(path, text, durable=False)


def _decide(breakdown_ms: dict[str, float], step_ms: float, on_gpu: bool) -> dict[str, Any]:
    from perfcore.analysis.verdict import avoidable, decide

    return decide(avoidable(breakdown_ms), step_ms, on_gpu=on_gpu, compute_ms=breakdown_ms.get("compute"))


class ProgressWriter:
    """Child side, one per instrumented process. Call tick(timer) after step ends (it returns at once
    unless a write is due); checkpoint(timer) is also called by tick every CHECKPOINT_EVERY_S."""

    def __init__(self, run_dir: Path, key: str, *, steps_wanted: int = 0, warmup: int = 0, on_gpu: bool = False,
                 clock: Callable[[], float] = time.monotonic, every_s: float = PROGRESS_EVERY_S,
                 checkpoint_s: float = CHECKPOINT_EVERY_S):
        self.run_dir, self.key = Path(run_dir), key
        self.steps_wanted, self.warmup, self.on_gpu = steps_wanted, warmup, on_gpu
        self.clock, self.every_s, self.checkpoint_s = clock, every_s, checkpoint_s
        t = clock()
        self.t_start, self.next_at, self.next_checkpoint = t, t + every_s, t + checkpoint_s
        self.rows_written = 0
        self.columns: list[str] | None = None
        self.failed: str | None = None  # a write that failed once is not retried every tick

    @classmethod
    def for_process(cls, run_dir: Path, rank: str | None, steps_wanted: int, warmup: int, on_gpu: bool
                    ) -> "ProgressWriter":
        """The writer of this process, keyed as its part is (rank<N> or pid<P>)."""
        key = f"rank{rank}" if rank is not None else f"pid{os.getpid()}"
        try:  # tests shorten the checkpoint interval; a bad value keeps the default
            every = float(os.environ.get("PERFCORE_CHECKPOINT_S") or CHECKPOINT_EVERY_S)
        except ValueError:
            every = CHECKPOINT_EVERY_S
        return cls(run_dir, key, steps_wanted=steps_wanted, warmup=warmup, on_gpu=on_gpu,
                   checkpoint_s=every if every > 0 else CHECKPOINT_EVERY_S)

    def tick(self, timer) -> None:
        t = self.clock()
        if t < self.next_at or self.failed:
            return
        self.next_at = t + self.every_s
        try:
            timer.upkeep(len(timer.boundaries))  # settles the steps ended so far, when settling is due
            self.write_progress(timer, t)
            if t >= self.next_checkpoint:
                self.next_checkpoint = t + self.checkpoint_s
                self.checkpoint(timer)
        except Exception as e:  # never into the training loop
            self.failed = f"{type(e).__name__}: {e}"

    def snapshot(self, timer, t: float | None = None) -> dict[str, Any]:
        """What the status line shows: steps, recent step time, the settled steps' shares and verdict."""
        t = self.clock() if t is None else t
        b = timer.boundaries
        n = len(b)
        k = min(n - 1, 256)
        recent_ms = (b[-1] - b[-1 - k]) / k / 1e6 if k > 0 else None
        store = timer.settled_totals()
        doc: dict[str, Any] = {"schema": "perfcore.progress/1", "pid": os.getpid(), "key": self.key, "steps": n,
                               "warmup": self.warmup, "steps_wanted": self.steps_wanted,
                               "elapsed_s": t - self.t_start, "step_ms": recent_ms, "time_ns": time.time_ns()}
        if store and store["measured"]:
            bd = {lb: store["ns"][lb] / store["measured"] / 1e6 for lb in LABELS}
            step_ms = store["wall_ns"] / store["measured"] / 1e6
            doc["breakdown_ms"] = bd
            doc["breakdown_fraction"] = {lb: (bd[lb] / step_ms if step_ms else 0.0) for lb in LABELS}
            doc["settled_steps"] = store["settled"]
            v = _decide(bd, step_ms, self.on_gpu)
            doc["verdict"] = {"bound": v["bound"], "level": v.get("level"), "summary": v["summary"]}
        return doc

    def write_progress(self, timer, t: float | None = None) -> dict[str, Any]:
        doc = self.snapshot(timer, t)
        d = self.run_dir / "progress"
        d.mkdir(parents=True, exist_ok=True)
        _write_atomic(d / f"{self.key}.json", json.dumps(doc))
        return doc

    def checkpoint(self, timer) -> Path | None:
        """parts/<key>/checkpoint/: steps.csv with the rows settled since the last checkpoint appended,
        and a run.json that says what the file holds (steps, the bytes it vouches for, backend,
        device). Results for finish_run when the process dies without writing its part (SIGKILL,
        OOM killer); the reader summarises the rows then, in the reading process, so a checkpoint
        costs the training process only its new rows, however long the run."""
        totals = timer.settled_totals()
        settled = int(totals["settled"])
        if not settled:
            return None
        from perfcore.report import jsonio

        names = timer.phase_names()
        cols = list(rows_to_table(timer.settled_rows(since=settled), names).columns)  # no rows: the header
        if cols != self.columns:  # the first checkpoint, or a custom phase appeared: write the file anew
            self.rows_written = 0
        d = self.run_dir / "parts" / self.key / "checkpoint"
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "steps.csv", "w" if self.rows_written == 0 else "a") as fh:
            # In slices: the first checkpoint of a fast loop may hold 100k rows, and one table of
            # them all would be a peak the training process keeps (the allocator does not give
            # it back).
            for start in range(self.rows_written, settled, CHECKPOINT_SLICE):
                part = rows_to_table(timer.settled_rows(since=start, upto=min(start + CHECKPOINT_SLICE, settled)),
                                     names)
                part.to_csv(fh, index=False, header=start == 0)
            fh.flush()
        self.columns, self.rows_written = cols, settled
        measured = int(totals["measured"])
        doc = {"schema": "perfcore.run/1", "backend": getattr(timer, "backend", "host"),
               "device": "cuda" if self.on_gpu else "cpu", "steps": measured, "warmup_steps": settled - measured,
               "pid": os.getpid(), "rank": int(os.environ["RANK"]) if os.environ.get("RANK") else None,
               # The bytes of steps.csv this checkpoint vouches for: an append cut short by a kill
               # lies beyond them and is ignored by the reader.
               "argv": [], "checkpoint": {"steps": settled, "written_unix_ns": time.time_ns(),
                                          "csv_bytes": (d / "steps.csv").stat().st_size},
               "exit": {"reason": "killed before writing its results", "exception": None}}
        jsonio.write(d / "run.json", doc)
        return d


def rows_to_table(rows, names: dict[int, str]):
    """Settled ns rows -> the columns of steps.csv (step, wall_ms, <label>_ms, warmup, <phase>_ms)."""
    import pandas as pd

    out = pd.DataFrame({"step": rows["step"].to_numpy(), "wall_ms": rows["wall_ns"].to_numpy() / 1e6})
    for lb in LABELS:
        out[f"{lb}_ms"] = rows[f"{lb}_ns"].to_numpy() / 1e6
    out["warmup"] = rows["warmup"].to_numpy(dtype=bool)
    for pid, name in sorted(names.items()):
        col = f"_phase{pid}_ns"
        if col in rows:
            out[f"{name}_ms"] = rows[col].to_numpy() / 1e6
    return out


def read_progress(run_dir: Path) -> dict[str, Any] | None:
    """The freshest progress file of a run (rank 0's when there are ranks), or None."""
    d = Path(run_dir) / "progress"
    if not d.is_dir():
        return None
    docs = []
    for f in d.glob("*.json"):
        try:
            docs.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue  # being replaced right now: the next refresh reads it
    if not docs:
        return None
    rank0 = [x for x in docs if x.get("key") == "rank0"]
    return rank0[0] if rank0 else max(docs, key=lambda x: x.get("time_ns", 0))


def status_text(p: dict[str, Any]) -> str:
    """One line: steps (of N, ETA), step time, the five shares, the verdict so far."""
    n, warm, want = int(p.get("steps", 0)), int(p.get("warmup", 0)), int(p.get("steps_wanted") or 0)
    parts = [f"perfcore: step {n}" + (f"/{warm + want}" if want else "")]
    ms = p.get("step_ms")
    if ms:
        parts.append(f"{ms:.1f} ms/step")
        if want and n < warm + want:
            parts.append(f"ETA {(warm + want - n) * ms / 1e3:.0f} s")
    fr = p.get("breakdown_fraction")
    if fr:
        parts.append(" ".join(f"{lb} {100 * fr.get(lb, 0):.0f}%" for lb in LABELS))
    v = (p.get("verdict") or {}).get("summary")
    if v:
        parts.append(v.split(";")[0])
    elif not fr:
        parts.append("shares after the first settled steps")
    return " | ".join(parts)


class _Refresher:
    """A daemon thread that calls the subclass's refresh() every every_s until stopped; a failing
    refresh ends the thread quietly (a status line is never worth failing a run for)."""

    every_s: float

    def _start_thread(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.refresh()
            except Exception:
                return

    def _stop_thread(self) -> None:
        stop, thread = getattr(self, "_stop", None), getattr(self, "_thread", None)
        if stop is not None:
            stop.set()
        if thread is not None:
            thread.join(timeout=5)


class LiveStatus(_Refresher):
    """Parent side: a status line on stderr, refreshed every ~2 s from the child's progress file, via
    rich; nothing at all when stderr is not a terminal or quiet is set."""

    def __init__(self, run_dir: Path, *, quiet: bool = False, every_s: float = PROGRESS_EVERY_S, console=None):
        self.run_dir, self.every_s = Path(run_dir), every_s
        self.console = console
        self.enabled = not quiet and (console.is_terminal if console is not None else _stderr_is_tty())
        self._live = None
        self.shown: list[str] = []

    def start(self) -> "LiveStatus":
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.live import Live

        console = self.console or Console(stderr=True)
        self._live = Live("", console=console, auto_refresh=False, transient=True, redirect_stdout=False,
                          redirect_stderr=False)
        self._live.start()
        self._start_thread("perfcore-status")
        return self

    def refresh(self) -> str | None:
        p = read_progress(self.run_dir)
        if p is None or self._live is None:
            return None
        from rich.text import Text

        line = status_text(p)
        self.shown.append(line)
        self._live.update(Text(line, no_wrap=True, overflow="ellipsis"), refresh=True)
        return line

    def stop(self) -> None:
        self._stop_thread()
        if self._live is not None:
            self._live.stop()
            self._live = None


class NotebookStatus(_Refresher):
    """The same status line in a notebook (%%perfcore): one output area under the cell, updated in place
    every ~2 s from the progress file. Nothing outside an IPython kernel."""

    def __init__(self, run_dir: Path, *, every_s: float = PROGRESS_EVERY_S, handle=None):
        self.run_dir, self.every_s, self.handle = Path(run_dir), every_s, handle

    def start(self) -> "NotebookStatus":
        if self.handle is None:
            try:
                from IPython import get_ipython
                from IPython.display import HTML, display
            except ImportError:
                return self
            if get_ipython() is None:
                return self
            self.handle = display(HTML(""), display_id=True)
        self._start_thread("perfcore-notebook-status")
        return self

    def refresh(self) -> str | None:
        p = read_progress(self.run_dir)
        if p is None or self.handle is None:
            return None
        import html

        line = status_text(p)
        self.handle.update(_html(f"<code>{html.escape(line)}</code>"))
        return line

    def stop(self) -> None:
        self._stop_thread()
        if self.handle is not None:
            try:
                self.handle.update(_html(""))  # the report below replaces it
            except Exception:
                pass


def _html(text: str):
    try:
        from IPython.display import HTML
    except ImportError:
        return text
    return HTML(text)


def _stderr_is_tty() -> bool:
    try:
        return os.isatty(2)
    except (OSError, ValueError):
        return False
