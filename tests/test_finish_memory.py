"""What perfcore's own process holds while it finishes a long run: the summaries it takes over the
steps table read the columns they need, never a row-selected copy of the whole table."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd

from perfcore.run.parent.evidence import monitor_summary


def test_the_monitor_summary_copies_only_its_columns():
    """Measured on a real 100k-step part (tracemalloc): 11.0 MiB while the measured rows of the whole
    table were selected, 1.6 MiB once only the monitor columns are. Here: 24 float columns, so a
    whole-table copy is ~100% of the table and the two monitor columns and warm-up flag ~10%."""
    n = 200_000
    rng = np.random.default_rng(0)
    table = pd.DataFrame({f"c{i}_ms": rng.random(n) for i in range(22)})
    table["warmup"] = np.arange(n) < 5
    table["monitor_power_w"] = rng.random(n) * 300
    table["monitor_temp_c"] = rng.random(n) * 80
    samples = pd.DataFrame({"cpu_percent": [50.0, 60.0], "power_w": [200.0, 210.0], "temp_c": [60.0, 61.0]})
    size = table.memory_usage(index=False).sum()
    tracemalloc.start()
    try:
        doc = monitor_summary(samples, table)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert doc["per_step"]["power_w"]["steps"] == n - 5
    assert peak < 0.3 * size, f"the monitor summary held {peak / size:.0%} of the table's size"


def _bins_peak(n: int) -> int:
    from perfcore.analysis.attribution import LABELS
    from perfcore.analysis.bins import bin_steps, outliers

    rng = np.random.default_rng(0)
    table = pd.DataFrame({"step": np.arange(n), "wall_ms": rng.random(n) + 1.0})
    for c in [f"{lb}_ms" for lb in LABELS] + [f"c{i}_ms" for i in range(14)]:
        table[c] = rng.random(n)
    table["warmup"] = np.arange(n) < 5
    tracemalloc.start()
    try:
        bin_steps(table)
        outliers(table)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_binning_and_outliers_hold_a_few_columns_not_the_table():
    """The breakdown plot bins the whole steps table: measured 179 bytes a row (a per-row bin index, a
    groupby's sorted copies, the measured rows of every column) against 17 once the quantiles are taken
    per bin slice and the outliers read two columns. A table copy here is 168 bytes a row (21 columns)."""
    small, large = _bins_peak(200_000), _bins_peak(600_000)
    per_row = (large - small) / 400_000
    assert per_row < 40, f"binning took {per_row:.0f} more bytes per row (200k -> 600k steps)"


def _trace_peak(tmp_path, n: int) -> int:
    """Peak bytes while trace.json is written for one process of n steps (a few spans kept)."""
    from steps_tables import steps_table

    from perfcore.analysis.process_part import Part
    from perfcore.report.chrome_trace import write_trace

    steps = steps_table(n)
    wall = (steps["wall_ms"].to_numpy() * 1e6).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(wall)[:-1]]) + 10**12
    k = np.arange(0, n, n // 50)  # a span in 50 steps: the intervals a recording keeps are capped
    raw = {
        "step_start_ns": start,
        "step_wall_ns": wall,
        "span_phase": np.full(len(k), 3, dtype=np.int32),
        "span_start_ns": start[k],
        "span_end_ns": start[k] + 1000,
        "span_thread": np.ones(len(k), dtype=np.int64),
        "span_step": k,
        "phase_ids": np.array([3], dtype=np.int32),
        "phase_names": np.array(["forward"]),
    }
    tracemalloc.start()
    try:
        write_trace(tmp_path / f"trace{n}.json", [Part.parse({"pid": 1}, steps, raw)])
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_writing_the_trace_holds_little_per_step(tmp_path):
    """The trace's step track is bounded (bins past MAX_STEP_EVENTS), but choosing its steps went over
    every step: measured 33 bytes a step from 200k to 600k steps (copies of the starts and walls, each
    step's start and end as floats, an index of every step); 1 once a step's times are read per event.
    (The events are also written a list at a time now, not as one text: that part does not grow.)"""
    _trace_peak(tmp_path, 2_000)  # the modules a first write imports
    small, large = _trace_peak(tmp_path, 200_000), _trace_peak(tmp_path, 600_000)
    per_row = (large - small) / 400_000
    assert per_row < 12, f"writing the trace took {per_row:.0f} more bytes per step (200k -> 600k steps)"
