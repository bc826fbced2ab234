"""Chrome/Perfetto trace (JSON): host phases and GPU activity of a run on one clock.

One process track per rank (host threads inside it), one per GPU of a rank (a thread per CUDA
stream), and a `steps` track with each step's breakdown in its args. Opens in ui.perfetto.dev
and chrome://tracing. Bounded: past `max_events`, only the steps of a window (the slowest, a
median one, the last) keep their detail, so a long run's trace stays openable.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["build_trace", "write_trace"]

MAX_EVENTS = 400_000
MAX_STEP_EVENTS = 5_000  # step events of a run whose detail was all kept (a short run)


def _window(step_start: np.ndarray, step_wall: np.ndarray) -> list[int]:
    if len(step_wall) == 0:
        return []
    order = np.argsort(step_wall)
    picks = {int(order[-1]), int(order[len(order) // 2]), len(step_wall) - 1}
    return sorted(picks)


def _steps_with_detail(s0: np.ndarray, s1: np.ndarray, raw: dict[str, Any]) -> np.ndarray:
    """Indices of the steps that some recorded interval overlaps (the run's kept detail), vectorised."""
    hit = np.zeros(len(s0), dtype=bool)
    for a_key, b_key in (("span_start_ns", "span_end_ns"), ("kernel_start_ns", "kernel_end_ns"),
                         ("memcpy_start_ns", "memcpy_end_ns"), ("event_start_ns", "event_end_ns")):
        if a_key not in raw or not len(raw[a_key]):
            continue
        a, b = np.asarray(raw[a_key], np.int64), np.asarray(raw[b_key], np.int64)
        # Steps [first, last] an interval touches: every step in between is covered too.
        first = np.clip(np.searchsorted(s1, a, side="right"), 0, len(s0))
        last = np.clip(np.searchsorted(s0, b, side="left") - 1, -1, len(s0) - 1)
        ok = first <= last
        delta = np.zeros(len(s0) + 1, dtype=np.int64)
        np.add.at(delta, first[ok], 1)
        np.add.at(delta, last[ok] + 1, -1)
        hit |= np.cumsum(delta)[:-1] > 0
    return np.flatnonzero(hit)


def build_trace(parts: list[dict[str, Any]], max_events: int = MAX_EVENTS) -> dict[str, Any]:
    """parts: one dict per process: {"label", "pid", "raw" (trace.npz arrays), "steps" (DataFrame)}."""
    t0 = min((int(p["raw"]["step_start_ns"][0]) for p in parts if len(p["raw"]["step_start_ns"])), default=0)
    events: list[dict] = []
    total = sum(len(p["raw"].get("span_start_ns", [])) + len(p["raw"].get("kernel_start_ns", []))
                + len(p["raw"].get("memcpy_start_ns", [])) + len(p["raw"].get("event_start_ns", [])) for p in parts)
    windowed = total > max_events
    for i, p in enumerate(parts):
        raw, pid, gpu_pid = p["raw"], 2 * i + 1, 2 * i + 2
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"{p['label']} host"}})
        events.append({"name": "process_name", "ph": "M", "pid": gpu_pid, "args": {"name": f"{p['label']} GPU"}})
        s0, wall = raw["step_start_ns"].astype(np.int64), raw["step_wall_ns"].astype(np.int64)
        # The steps track shows the steps whose detail the trace holds (a window of a long run) and
        # the window's picks: never one event per step of a 100k-step run.
        picks = set(_window(s0, wall)) if windowed else set(_steps_with_detail(s0, s0 + wall, raw).tolist())
        if windowed or not picks:
            picks |= set(_window(s0, wall))
        keep_steps = sorted(picks)[:MAX_STEP_EVENTS]
        lo = s0[keep_steps] if keep_steps else np.zeros(0, np.int64)
        hi = (s0 + wall)[keep_steps] if keep_steps else np.zeros(0, np.int64)

        def keep(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            if not windowed:
                return np.ones(len(a), dtype=bool)
            m = np.zeros(len(a), dtype=bool)
            for x, y in zip(lo, hi):
                m |= (a < y) & (b > x)
            return m

        steps = p["steps"]
        ms_cols = [c for c in steps.columns if c.endswith("_ms")]
        if keep_steps:
            rows = steps.iloc[keep_steps]
            vals = {c: np.round(rows[c].to_numpy(dtype=np.float64), 3).tolist() for c in ms_cols}
            numbers = rows["step"].to_numpy().tolist() if "step" in rows else keep_steps
            for j, k in enumerate(keep_steps):
                events.append({"name": f"step {int(numbers[j])}", "ph": "X", "pid": pid, "tid": 0, "cat": "step",
                               "ts": (int(s0[k]) - t0) / 1e3, "dur": int(wall[k]) / 1e3,
                               "args": {c: vals[c][j] for c in ms_cols}})
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "steps"}})
        names = dict(zip(raw["phase_ids"].tolist(), raw["phase_names"].tolist()))
        a, b = raw["span_start_ns"], raw["span_end_ns"]
        m = keep(a, b)
        for ph, st, en, tid, step in zip(raw["span_phase"][m], a[m], b[m], raw["span_thread"][m], raw["span_step"][m]):
            events.append({"name": names.get(int(ph), str(ph)), "ph": "X", "pid": pid, "tid": int(tid), "cat": "host",
                           "ts": (int(st) - t0) / 1e3, "dur": (int(en) - int(st)) / 1e3, "args": {"step": int(step)}})
        if "kernel_start_ns" in raw:
            a, b = raw["kernel_start_ns"], raw["kernel_end_ns"]
            m = keep(a, b)
            for nm, st, en, stream in zip(raw["kernel_name"][m], a[m], b[m], raw["kernel_stream"][m]):
                events.append({"name": str(nm), "ph": "X", "pid": gpu_pid, "tid": int(stream), "cat": "kernel",
                               "ts": (int(st) - t0) / 1e3, "dur": (int(en) - int(st)) / 1e3})
        if "memcpy_start_ns" in raw:
            a, b = raw["memcpy_start_ns"], raw["memcpy_end_ns"]
            m = keep(a, b)
            for d, st, en, stream, nb, pg in zip(raw["memcpy_direction"][m], a[m], b[m], raw["memcpy_stream"][m],
                                                 raw["memcpy_bytes"][m], raw["memcpy_pageable"][m]):
                events.append({"name": f"memcpy {d}" + (" (pageable)" if pg else ""), "ph": "X", "pid": gpu_pid,
                               "tid": int(stream), "cat": "memcpy", "ts": (int(st) - t0) / 1e3,
                               "dur": (int(en) - int(st)) / 1e3, "args": {"bytes": int(nb)}})
        if "event_start_ns" in raw:
            a, b = raw["event_start_ns"], raw["event_end_ns"]
            m = keep(a, b)
            for ph, st, en in zip(raw["event_phase"][m], a[m], b[m]):
                events.append({"name": f"{names.get(int(ph), ph)} (GPU)", "ph": "X", "pid": gpu_pid, "tid": 0,
                               "cat": "gpu", "ts": (int(st) - t0) / 1e3, "dur": (int(en) - int(st)) / 1e3})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"producer": "perfcore", "windowed": windowed, "clock": "CLOCK_MONOTONIC",
                          "origin_ns": t0}}


def write_trace(path: Path, parts: list[dict[str, Any]], max_events: int = MAX_EVENTS) -> dict[str, Any]:
    doc = build_trace(parts, max_events)
    from perfcore.report import jsonio

    jsonio.write_text(Path(path), json.dumps(doc, separators=(",", ":")))
    return doc
