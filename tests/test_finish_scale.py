"""Finishing a run folder costs the same at 1k and 100k steps beyond reading the columns once: the
plot has a fixed number of shapes, the trace's step track is binned past a cap, the
report's size is flat, steps.csv is copied rather than re-formatted. (Times: bench/bench_finish.py.)"""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from steps_tables import steps_table as table

import perfcore
from perfcore.analysis.bins import BINS, bin_steps, outliers
from perfcore.recording.engine import detail_steps
from perfcore import jsonio

LABELS = ("load", "transfer", "compute", "comm", "host")


def test_bins_keep_the_identity_and_their_statistics():
    df = table(100_003)
    b = bin_steps(df)
    assert len(b) == BINS and b["steps"].sum() == len(df)
    assert b["first_step"].iloc[0] == 0 and b["last_step"].iloc[-1] == len(df) - 1
    assert (b["first_step"].to_numpy()[1:] == b["last_step"].to_numpy()[:-1] + 1).all()  # contiguous
    assert np.allclose(b[[f"{lb}_ms" for lb in LABELS]].sum(axis=1), b["wall_ms"])  # the five still sum
    i = 37
    rows = df.iloc[int(b["first_step"][i]): int(b["last_step"][i]) + 1]
    assert b["median_ms"][i] == pytest.approx(rows["wall_ms"].median())
    assert b["p90_ms"][i] == pytest.approx(rows["wall_ms"].quantile(0.9))
    assert b["warmup"].tolist()[:2] == [True, False]
    short = bin_steps(df.iloc[:50])
    assert len(short) == 50 and (short["steps"] == 1).all()


def test_every_bins_median_and_p90_come_from_a_call_per_bin_size(monkeypatch):
    """Bins of one size are one quantile call (two sizes at most), each bin's figures bit for bit its own
    slice's: a call per bin was a tenth of a second of a 20k-step run's finish."""
    df = table(20_011)
    calls = []
    quantile = np.quantile

    def counted(*a, **k):
        calls.append(1)
        return quantile(*a, **k)

    monkeypatch.setattr(np, "quantile", counted)
    b = bin_steps(df)
    assert len(calls) <= 2
    wall = df["wall_ms"].to_numpy()
    for i in range(BINS):
        own = quantile(wall[int(b["first_step"][i]) : int(b["last_step"][i]) + 1], [0.5, 0.9])
        assert (b["median_ms"][i], b["p90_ms"][i]) == (own[0], own[1])


def test_outliers_are_the_slowest_measured_steps():
    df = table(10_000)
    slow = [500, 7000, 9999]
    df.loc[slow, "wall_ms"] *= 10
    df.loc[2, "wall_ms"] *= 50  # a warm-up step is not an outlier
    out = outliers(df, limit=2)
    assert out.attrs["count"] == 3 and len(out) == 2
    assert set(out["step"]) <= set(slow) and out["wall_ms"].is_monotonic_decreasing


def test_the_plot_marks_the_steps_the_verdict_set_apart():
    """One definition of an outlier step: the plot's markers are the steps robust_breakdown leaves out of
    every figure the brief quotes, so "N outlier step(s) set apart" reads the same N in both."""
    from perfcore.analysis.uncertainty import robust_breakdown

    df = table(5_000)
    rng = np.random.default_rng(3)
    slow = rng.choice(np.arange(10, 5_000), 40, replace=False)
    df.loc[slow, "wall_ms"] *= rng.uniform(2.5, 2.9, 40)  # far above the steady steps, under 3x the median
    df.loc[slow, "host_ms"] = df.loc[slow, "wall_ms"] - df.loc[slow, ["load_ms", "transfer_ms", "compute_ms", "comm_ms"]].sum(axis=1)
    df.loc[slow[:5], "load_ms"] += df.loc[slow[:5], "host_ms"]  # a data wait: the loop's own, kept in
    df.loc[slow[:5], "host_ms"] = 0.0
    measured = df[~df["warmup"]]
    rb = robust_breakdown(measured)
    out = outliers(df, limit=100)
    assert out.attrs["count"] == rb["outliers"]["count"] == 35  # the 40 slow steps but the 5 data waits
    assert set(out["step"]) == set(slow[5:].tolist()) >= set(rb["outliers"]["steps"])


def test_plot_has_a_fixed_number_of_shapes(tmp_path, monkeypatch):
    from perfcore.report import plots
    from perfcore.report.plots import plot_breakdown

    counts = []
    real = plots.Figure.save

    def count_then_save(fig, path):
        counts.append(fig.primitives)
        return real(fig, path)

    monkeypatch.setattr(plots.Figure, "save", count_then_save)
    for n in (2_000, 100_000):
        t = table(n)
        t.loc[[100, n // 2, n - 1], ["host_ms", "wall_ms"]] += 40.0  # slow steps at either length: markers in both
        plot_breakdown(t, tmp_path / f"b{n}.png")
    assert counts[0] == counts[1] < 40, counts


def long_part(folder, n: int):
    """A real StepTimer's n steps written as an instrumented process writes its part."""
    timer = perfcore.StepTimer(device="cpu", warmup=5)
    for _ in timer.load(range(n)):
        with timer.compute():
            pass
        timer.step()
    steps = timer.summary()
    doc = timer.result().to_dict()
    full = timer.engine.step_table()
    doc.update(pid=os.getpid(), rank=None, world_size=None, host=socket.gethostname(), argv=["train.py"],
               exit={"reason": "finished", "exception": None}, step_source="timer.step()")
    part = folder / "parts" / f"pid{os.getpid()}"
    part.mkdir(parents=True)
    steps.to_csv(part / "steps.csv", index=False)
    spans = timer.engine.trace_tables()["spans"]
    names = timer.engine.phase_names()
    kept = detail_steps(timer.engine)
    np.savez_compressed(part / "trace.npz", span_phase=spans["phase_id"].to_numpy(),
                        span_start_ns=spans["start_ns"].to_numpy(), span_end_ns=spans["end_ns"].to_numpy(),
                        span_thread=spans["thread_id"].to_numpy(), span_step=spans["step"].to_numpy(),
                        phase_ids=np.array(list(names), dtype=np.int32),
                        phase_names=np.array(list(names.values()), dtype=str),
                        step_start_ns=full["start_ns"].to_numpy(), step_wall_ns=full["wall_ns"].to_numpy(),
                        detail_through=kept["through"], detail_settled=kept["settled"],
                        detail_window=np.array(kept["window"], dtype=np.int64),
                        detail_cap_steps=kept["cap_steps"], detail_cap_rows=kept["cap_rows"])
    jsonio.write(part / "run.json", doc)
    return part


def test_finishing_a_long_run_writes_bounded_outputs(tmp_path):
    from perfcore.run.parent.finish import finish_run

    n = 60_000
    part = long_part(tmp_path, n)
    (part / "checkpoint").mkdir()
    (part / "checkpoint" / "steps.csv").write_text("step\n0\n")  # a checkpoint the finished part outdates
    doc = finish_run(tmp_path, 0, ["python", "train.py"])
    assert not (part / "checkpoint").exists()
    assert (tmp_path / "steps.csv").read_bytes() == (part / "steps.csv").read_bytes()  # copied, not re-formatted
    assert {"run.json", "steps.csv", "trace.json", "breakdown.png", "report.html"} <= set(doc.files)
    trace = json.loads((tmp_path / "trace.json").read_text())
    from perfcore.analysis.detail import DETAIL_STEPS
    from perfcore.report.chrome_trace import MAX_STEP_EVENTS

    # The steps track: bins of consecutive steps covering the run, then each step with intervals
    # (every one up to the recording's cap, and a window past it), never one event per step.
    bins = [e for e in trace["traceEvents"] if e.get("cat") == "steps"]
    assert len(bins) <= MAX_STEP_EVENTS and sum(e["args"]["steps"] for e in bins) == n
    about = trace["otherData"]["processes"][0]
    assert trace["otherData"]["windowed"] and about["steps_with_intervals"][0] == [0, DETAIL_STEPS - 1]
    step_events = [e for e in trace["traceEvents"] if e.get("cat") == "step"]
    assert DETAIL_STEPS < len(step_events) <= DETAIL_STEPS + 4
    assert n - about["steps_without_intervals"] == len(step_events)
    assert (tmp_path / "trace.json").stat().st_size < 12_000_000
    assert (tmp_path / "report.html").stat().st_size < 300_000
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        assert "steps.parquet" not in doc.files
    else:
        back = pd.read_parquet(tmp_path / "steps.parquet")
        assert len(back) == n and np.allclose(back["wall_ms"], pd.read_csv(tmp_path / "steps.csv")["wall_ms"])


def test_the_instrumented_process_memory_is_flat_over_steps(tmp_path):
    """Under `perfcore run`, what perfcore keeps in the training process does not grow with steps:
    step ends are let go once settled, settled rows and memory samples go to a temporary file,
    checkpoints read and format only their new rows, a slice at a time. Before, the same loop grew
    ~120 bytes a step (3.6 MB over 30k steps: a Python int and list slot per step end, 9 int64
    columns, a tuple per memory sample; a checkpoint re-reading every row). Now: ~8 MB once (the
    first settle and checkpoint: library pages, allocator state), then from step 30k to 60k
    0.0-0.5 MB, on a quiet machine and with two CPU burners alike. The window starts at 30k so
    that the one-time costs are behind it even when a busy machine slows the loop (they follow
    the clock: settling at most every 2 s, checkpoints every 2 s here)."""
    import subprocess
    import sys

    script = Path(__file__).parent / "scripts" / "tiny_loop.py"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--quiet", "--out", str(tmp_path / "r"),
                        "--test-setting", "checkpoint_s=2", "--", sys.executable, str(script), "60000"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    every = [int(v) for v in p.stderr.split("EVERY10K")[1].split()[:6]]
    # Growth past the high-water mark of the first 30k steps, not from the 30k sample alone: RSS dips
    # when the allocator hands a freed slice back and rises again when it is reused (one full-suite run
    # read 709.8, 714.6, 711.0, 714.2, 714.2, 714.2 MB), while a leak raises the mark itself.
    grew = (max(every[3:]) - max(every[:3])) / 1e6
    assert grew < 1.5, f"perfcore's process grew {grew:.1f} MB from step 30k to 60k (RSS every 10k: {every})"
    doc = json.loads((tmp_path / "r" / "run.json").read_text())
    assert doc["steps"] + doc["warmup_steps"] == 60000
