"""What a process holds while it writes a part at the end of a run: the training process writes the raw
part (its settled columns one at a time), which does not grow with the run's rows beyond one column;
writing the finished part (the parent, or a CUPTI run's own process) grows, and this bounds by how
much. (Recording itself stays flat over steps: test_finish_scale.)"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from perfcore.recording.engine import Recording
from perfcore.run.part_files import write_raw, write_steps

MS = 1_000_000


def _facts(t_start: int) -> dict:
    return {
        "common": {"pid": 1, "rank": None, "loaders": [], "step_source": "timer.step()"},
        "cpu_util_percent": 50.0,
        "eval_rows": [7],
        "eval_passes": [[t_start, t_start + 3 * MS]],
        "mem_kind": "rss",
        "memory_limits": {"capacity_bytes": 2**34},
        "skipped_boundaries": 0,
        "training_batches": 12,
        "scaler_skipped_steps": 0,
        "t_start": t_start,
        "notes": [],
        "backend_note": None,
        "requested_backend": "auto",
    }


def _write_peak(tmp_path, n: int, write=write_steps) -> int:
    """Peak bytes Python and numpy allocate while write_steps writes a part of n steps (load and three
    compute phases a step, as `perfcore run` times a plain loop)."""
    rec = Recording(device="cpu", warmup=5)
    load = rec.fetch_scope()
    phases = [rec.phase(name, "compute") for name in ("forward", "backward", "optimizer")]
    t_start = time.perf_counter_ns() - 50 * MS
    for _ in range(n):
        with load:
            pass
        for ph in phases:
            with ph:
                pass
        rec.step()
    rec.close()
    at = np.arange(0, n, 8)
    out = tmp_path / f"n{n}"
    out.mkdir()
    tracemalloc.start()
    try:
        write(rec, _facts(t_start), at, np.full(len(at), 100 * 2**20), out)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_writing_a_part_costs_a_bounded_amount_per_row(tmp_path):
    """Measured (tracemalloc; one evaluation row, as a validation pass makes): 806 bytes a row from 40k
    to 120k steps while the summary was handed the whole 24-column table (it selects rows of it as
    copies: ~800 MB at 1M steps), 531 once it gets the 14 columns it reads (without the evaluation
    row: 607 -> 371); 533 with the evaluation row once the first write's imports are left out of the
    40k figure, and 372 once the ms view shares the table's columns, its frames are built without
    copying their arrays and the summaries select a few columns' rows (or a slice) instead of the
    whole table's; 194 once the table is never held whole (the summary gets its nine ns columns, 72
    bytes a row, and makes each ms column as it reads it; steps.csv is made in slices). This is the
    parent's peak at 1M steps (`perfcore run` finishes the part the training process left raw). The
    bound: those nine columns, the robust breakdown's float copies of six of them and of their kept
    rows (96), and 90 to spare: holding the ms table (14 columns here, 112 bytes a row) fails it."""
    _write_peak(tmp_path, 2_000)  # the modules a first write imports: not a cost of the 40k rows' write
    small, large = _write_peak(tmp_path, 40_000), _write_peak(tmp_path, 120_000)
    per_row = (large - small) / 80_000
    assert per_row < 72 + 96 + 90, f"writing the part took {per_row:.0f} more bytes per row (40k -> 120k steps)"


def test_steps_csv_written_in_slices_is_the_whole_tables(tmp_path, monkeypatch):
    """steps.csv is made and written a slice of rows at a time: byte for byte what the whole table's
    to_csv wrote, across slice edges, with a custom phase first timed in a later slice (its earlier
    rows read 0), an evaluation row and memory samples."""
    import pandas as pd

    import perfcore.run.part_files as part_files

    monkeypatch.setattr(part_files, "CSV_SLICE", 1_000)
    rec = Recording(device="cpu", warmup=5)
    load, fwd = rec.fetch_scope(), rec.phase("forward", "compute")
    late = None
    t_start = time.perf_counter_ns() - 50 * MS
    for i in range(2_500):
        with load:
            pass
        with fwd:
            pass
        if i == 1_700:
            late = rec.phase("late", "compute")
        if late is not None:
            with late:
                pass
        rec.step()
    rec.close()
    at = np.arange(0, 2_500, 7)
    out = tmp_path / "part"
    out.mkdir()
    part_files.write_steps(rec, _facts(t_start), at, at * 3, out)
    whole = rec.summary()
    whole["evaluation"] = np.arange(len(whole)) == 7
    mem = np.full(len(whole), -1, dtype=np.int64)
    mem[at] = at * 3
    whole["mem_bytes"] = mem
    expected = whole.to_csv(index=False)
    written = (out / "steps.csv").read_text()
    assert "late_ms" in whole and whole["late_ms"].iloc[:1_000].eq(0).all()
    assert written == expected
    assert len(pd.read_csv(out / "steps.csv")) == 2_500


def test_the_training_process_writes_its_raw_part_in_columns(tmp_path):
    """The raw part holds the settled columns (int64: 8 bytes a row each), written one at a time:
    only a column's blocks read back and their concatenation grow with the rows (measured: 21 bytes
    a row), never the whole table (86 bytes a row when every column was read before writing) nor a
    DataFrame of it (~530: the finished part's writer above)."""
    small, large = _write_peak(tmp_path, 40_000, write_raw), _write_peak(tmp_path, 120_000, write_raw)
    per_row = (large - small) / 80_000
    assert per_row < 40, f"writing the raw part took {per_row:.0f} more bytes per row (40k -> 120k steps)"
