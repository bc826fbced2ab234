"""trace.json holds every step of a run (up to the recording's cap), is bounded past it, says in
otherData which steps' intervals it holds and why, and is a Perfetto/Chrome trace."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfcore
import perfcore.recording.settling as settling
from perfcore.analysis.process_part import Part
from perfcore.recording.engine import detail_steps
from perfcore.report.chrome_trace import build_trace

SCRIPT = Path(__file__).parent / "scripts" / "tiny_loop.py"


def check_perfetto(doc: dict) -> None:
    """The JSON trace event format as Perfetto and chrome://tracing read it."""
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M", "i"), e
        assert isinstance(e["pid"], int) and isinstance(e["name"], str)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and isinstance(e["args"]["name"], str)
        elif e["ph"] == "i":  # an instant on its thread's track: no duration
            assert e["s"] == "t" and isinstance(e["tid"], int) and isinstance(e["ts"], (int, float)) and "dur" not in e
        else:
            assert isinstance(e["tid"], int)
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0


def steps_covered(doc: dict, pid: int = 1) -> set[int]:
    """The steps (by their step event) that some host span starts inside."""
    steps = [e for e in doc["traceEvents"] if e.get("cat") == "step" and e["pid"] == pid]
    starts = np.sort([e["ts"] for e in doc["traceEvents"] if e.get("cat") == "host" and e["pid"] == pid])
    out = set()
    for e in steps:
        lo, hi = np.searchsorted(starts, e["ts"]), np.searchsorted(starts, e["ts"] + e["dur"], side="right")
        if hi > lo:
            out.add(int(e["name"].split()[1]))
    return out


@pytest.mark.parametrize("n", [50, 235])
def test_perfcore_run_puts_every_step_in_the_trace(tmp_path, n):
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--quiet", "--out", str(out), "--",
                        sys.executable, str(SCRIPT), str(n)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((out / "trace.json").read_text())
    check_perfetto(doc)
    steps = [e for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert sorted(int(e["name"].split()[1]) for e in steps) == list(range(n))
    # Each step has its phases: forward, backward and optimizer spans start inside every one.
    assert steps_covered(doc) == set(range(n))
    for phase in ("forward", "backward", "optimizer"):
        assert sum(e["name"] == phase for e in doc["traceEvents"]) >= n
    od = doc["otherData"]
    assert od["windowed"] is False
    assert od["processes"][0]["steps_with_intervals"] == [[0, n - 1]]
    assert od["processes"][0]["step_track"] == "every step"


def _timer_parts(steps: int) -> list[Part]:
    timer = perfcore.StepTimer(device="cpu", warmup=2)
    for _ in timer.load(range(steps)):
        with timer.compute():
            pass
        timer.step()
    table = timer.summary()
    full = timer.engine.step_table()
    spans = timer.engine.trace_tables()["spans"]
    names = timer.engine.phase_names()
    kept = detail_steps(timer.engine)
    raw = {"span_phase": spans["phase_id"].to_numpy(), "span_start_ns": spans["start_ns"].to_numpy(),
           "span_end_ns": spans["end_ns"].to_numpy(), "span_thread": spans["thread_id"].to_numpy(),
           "span_step": spans["step"].to_numpy(), "phase_ids": np.array(list(names), dtype=np.int32),
           "phase_names": np.array(list(names.values()), dtype=str),
           "step_start_ns": full["start_ns"].to_numpy(), "step_wall_ns": full["wall_ns"].to_numpy(),
           "detail_through": np.int64(kept["through"]), "detail_settled": np.int64(kept["settled"]),
           "detail_window": np.array(kept["window"], dtype=np.int64),
           "detail_cap_steps": np.int64(kept["cap_steps"]), "detail_cap_rows": np.int64(kept["cap_rows"])}
    return [Part.parse({"pid": 1}, table, raw)]


def test_a_long_run_is_binned_and_says_which_steps_have_intervals(monkeypatch):
    from perfcore.analysis import detail

    monkeypatch.setattr(settling, "COMPACT_MIN_S", 0.0)  # settle every COMPACT_EVERY steps
    monkeypatch.setattr(settling, "FIRST_COMPACT_S", 0.0)
    monkeypatch.setattr(detail, "DETAIL_STEPS", 1500)
    n = 6000
    parts = _timer_parts(n)
    doc = build_trace(parts, max_step_events=1000)
    check_perfetto(doc)
    ev = doc["traceEvents"]
    bins = [e for e in ev if e.get("cat") == "steps"]
    assert len(bins) == 1000 and sum(e["args"]["steps"] for e in bins) == n
    assert bins[0]["name"] == "steps 0-5" and bins[-1]["name"] == f"steps {n - 6}-{n - 1}"
    # A bin's mean is the mean of its steps.
    table = parts[0].table
    assert bins[7]["args"]["mean_wall_ms"] == pytest.approx(table["wall_ms"].iloc[42:48].mean(), abs=1e-3)
    about = doc["otherData"]["processes"][0]
    assert doc["otherData"]["windowed"] is True and about["steps"] == n
    assert about["steps_with_intervals"][0] == [0, 1499]
    kept = sum(b - a + 1 for a, b in about["steps_with_intervals"])
    assert 1500 < kept <= 1500 + 3 and about["steps_without_intervals"] == n - kept
    assert [n - 1, n - 1] in about["steps_with_intervals"]
    assert "first 1500 steps" in about["why"] and "the cap: 1500 steps" in about["why"]
    assert "bins of 6 consecutive steps" in about["step_track"]
    # Each step with intervals has its own event; its spans are in the trace, no one else's.
    singles = {int(e["name"].split()[1]) for e in ev if e.get("cat") == "step"}
    assert len(singles) == kept and steps_covered(doc) == singles


def test_past_max_events_the_trace_keeps_the_first_steps_and_says_so():
    n = 400
    parts = _timer_parts(n)  # 2 spans a step (load, compute) and the last fetch
    doc = build_trace(parts, max_events=300)
    check_perfetto(doc)
    host = [e for e in doc["traceEvents"] if e.get("cat") == "host"]
    assert len(host) <= 300
    about = doc["otherData"]["processes"][0]
    assert doc["otherData"]["windowed"] is True
    first = about["steps_with_intervals"][0]
    assert first[0] == 0 and 140 <= first[1] < 150  # the window's steps take their share of the budget
    assert "at most 300 intervals" in about["why"]
    # Every step still has its step event (under the cap): only the intervals are trimmed.
    assert sum(e.get("cat") == "step" for e in doc["traceEvents"]) == n


def test_a_short_run_without_recorded_coverage_is_inferred_from_its_intervals():
    parts = _timer_parts(30)
    for k in [k for k in parts[0].raw if k.startswith("detail_")]:
        del parts[0].raw[k]  # a part written before the coverage was recorded
    doc = build_trace(parts)
    assert doc["otherData"]["processes"][0]["steps_with_intervals"] == [[0, 29]]
    assert doc["otherData"]["windowed"] is False


def test_line_samples_are_instants_on_the_training_threads_track_in_the_kept_steps():
    parts = _timer_parts(30)
    raw, steps = parts[0].raw, parts[0].table
    s0, wall = raw["step_start_ns"].astype(np.int64), raw["step_wall_ns"].astype(np.int64)
    tid = int(raw["span_thread"][0])
    # One sample in the middle of steps 3 and 7, one before the first step, one with a site the table lacks.
    t = [int(s0[0]) - 1000, int(s0[3] + wall[3] // 2), int(s0[7] + wall[7] // 2), int(s0[9] + wall[9] // 2)]
    raw.update(
        line_t_ns=np.array(t, np.int64),
        line_site=np.array([0, 0, 1, 5], np.int32),
        line_file=np.array(["/u/train.py", "/lib/torch/x.py"]),
        line_function=np.array(["metrics", "item"]),
        line_line=np.array([31, 9]),
        line_user=np.array([True, False]),
        line_tid=np.int64(tid),
    )
    doc = build_trace(parts)
    check_perfetto(doc)
    got = [e for e in doc["traceEvents"] if e.get("cat") == "line"]
    assert [(e["name"], e["args"]["step"], e["tid"]) for e in got] == [
        ("metrics (train.py:31)", int(steps["step"].iloc[3]), tid),
        ("item (x.py:9)", int(steps["step"].iloc[7]), tid),
    ]
    assert got[0]["args"] == {"file": "/u/train.py", "line": 31, "user": True, "step": int(steps["step"].iloc[3])}
    assert doc["otherData"]["processes"][0]["line_samples"] == 2
    # Steps whose intervals are not in the trace carry none of their samples either.
    raw["detail_through"], raw["detail_settled"], raw["detail_window"] = (
        np.int64(5),
        np.int64(30),
        np.zeros(0, np.int64),
    )
    assert [e["args"]["step"] for e in build_trace(parts)["traceEvents"] if e.get("cat") == "line"] == [
        int(steps["step"].iloc[3])
    ]
    # Without the training thread's OS id the samples get a track of their own, named.
    raw["line_tid"] = np.int64(0)
    ev = build_trace(parts)["traceEvents"]
    assert {e["tid"] for e in ev if e.get("cat") == "line"} == {-1}
    assert any(e["ph"] == "M" and e.get("tid") == -1 and e["args"]["name"] == "host lines (sampled)" for e in ev)
    # Arrays a damaged part holds draw no samples and break nothing else.
    for k, bad in (("line_t_ns", np.array(["x"])), ("line_tid", np.array([1, 2])), ("line_site", np.zeros((1, 2), int))):
        damaged = [dataclasses.replace(parts[0], raw={**raw, k: bad})]
        doc = build_trace(damaged)
        assert not any(e.get("cat") == "line" for e in doc["traceEvents"]) and doc["otherData"]["processes"][0]["steps"] == 30


def _calls_to_build(parts: list[dict], **kw) -> int:
    """Python calls (functions and builtins) made while the trace is built."""
    import sys

    count = 0

    def profile(frame, event, arg):
        nonlocal count
        count += event in ("call", "c_call")

    sys.setprofile(profile)
    try:
        build_trace(parts, **kw)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize("n, max_step_events", [(2000, 10_000), (4000, 1000)])
def test_the_steps_track_costs_no_call_per_figure(n, max_step_events):
    """A step event's figures are made a column at a time: more columns add no Python call per step (a round()
    and a numpy scalar per figure took most of a 20k-step run's finish)."""
    rng = np.random.default_rng(0)
    s0 = np.cumsum(rng.integers(10_000, 20_000, n)).astype(np.int64)
    raw = {"step_start_ns": s0, "step_wall_ns": np.full(n, 9_000, np.int64)}
    raw.update(
        {k: np.zeros(0, np.int64) for k in ("span_phase", "span_start_ns", "span_end_ns", "span_thread", "span_step")}
    )
    raw.update(phase_ids=np.zeros(0, np.int32), phase_names=np.zeros(0, str))

    def parts(columns: int) -> list[dict]:
        # Figures with whole ns, as steps.csv has them: none sits on a half of the third decimal.
        figures = {f"c{i}_ms": rng.integers(0, 10**7, n) * 2 / 1e6 + 1e-7 for i in range(columns)}
        return [Part.parse({"pid": 1}, pd.DataFrame({"step": np.arange(n), **figures}), raw, label="pid 1")]

    few, many = (_calls_to_build(parts(c), max_step_events=max_step_events) for c in (2, 30))
    # pandas' and numpy's calls for each column, none for each of its n figures.
    assert many - few < 28 * 300, (few, many)
    doc = build_trace(parts(30), max_step_events=max_step_events)
    figures = [e["args"] for e in doc["traceEvents"] if e.get("cat") in ("step", "steps")]
    assert figures and all(len(a) >= 30 for a in figures)


def test_round_ms_is_pythons_round_to_the_bit():
    """The trace's figures are what round(x, 3) gives, ties and their neighbours, huge and tiny ones included."""
    from perfcore.report.chrome_trace import round_ms

    rng = np.random.default_rng(1)
    ties = (rng.integers(-(10**9), 10**9, 20_000) + 0.5) / 1000
    x = np.concatenate(
        [
            ties,
            np.nextafter(ties, np.inf),
            np.nextafter(ties, -np.inf),
            rng.random(20_000) * 10,
            rng.integers(0, 10**9, 20_000) / 1e6,  # whole ns as ms, as steps.csv holds them
            10 ** rng.uniform(-310, 308, 20_000) * rng.choice([-1, 1], 20_000),
            [0.0, -0.0, -0.0004, 0.0625, 2.675, 4.5e12, 1e300, 5e-324, np.inf, -np.inf],
        ]
    )
    assert [repr(v) for v in round_ms(x).tolist()] == [repr(round(v, 3)) for v in x.tolist()]
    assert np.isnan(round_ms(np.array([np.nan]))).all()
