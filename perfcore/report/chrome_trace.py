"""Chrome/Perfetto trace (JSON): host phases and GPU activity of a run on one clock.

One process track per rank (host threads inside it; the sampled host lines as instant events on the
training thread's track, each naming the user's function and file:line), one per GPU of a rank (a thread per CUDA
stream), each named with its node where the ranks ran on several, and a `steps` track: every step with its
breakdown in its args, or past MAX_STEP_EVENTS steps (past MAX_JOB_STEP_EVENTS shared by all processes,
STEP_EVENTS_FLOOR at least each) one event per bin of consecutive steps (their mean breakdown). The intervals are those the
run kept: every step's, up to the recording's cap (analysis.detail: 10,000 steps or 200,000
intervals), then a window of steps; and at most `max_events` of them (shared by the processes),
the first steps' and the window's. `otherData.processes` says, per process, which steps' intervals
the trace holds and why the others are not in it. Opens in ui.perfetto.dev and chrome://tracing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from perfcore.analysis.process_part import Part

__all__ = ["build_trace", "write_trace", "line_events", "MAX_EVENTS", "MAX_STEP_EVENTS", "MAX_LINE_EVENTS"]

MAX_EVENTS = 400_000  # interval events in one trace, all processes together
MAX_STEP_EVENTS = 10_000  # step events per process; past it, bins of consecutive steps
MAX_JOB_STEP_EVENTS, STEP_EVENTS_FLOOR = 160_000, 1_000  # all processes' together, and each one's least
_WRITE_EVENTS = 4096  # events encoded at a time when the trace is written
MAX_LINE_EVENTS = 200_000  # host-line samples per process (the first ones of the steps whose intervals are in)
TABLES = (
    ("span_start_ns", "span_end_ns"),
    ("kernel_start_ns", "kernel_end_ns"),
    ("memcpy_start_ns", "memcpy_end_ns"),
    ("event_start_ns", "event_end_ns"),
)


def _window(step_wall: np.ndarray, among: np.ndarray) -> list[int]:
    """The slowest, a median and the last of the steps `among` (indices)."""
    if len(among) == 0:
        return []
    order = among[np.argsort(step_wall[among], kind="stable")]
    return sorted({int(order[-1]), int(order[len(order) // 2]), int(among[-1])})


def _ranges(kept: np.ndarray) -> list[list[int]]:
    """Indices of True as [first, last] runs."""
    idx = np.flatnonzero(kept)
    if not len(idx):
        return []
    cut = np.flatnonzero(np.diff(idx) > 1)
    firsts, lasts = np.r_[idx[0], idx[cut + 1]], np.r_[idx[cut], idx[-1]]
    return [[int(a), int(b)] for a, b in zip(firsts, lasts)]


def _step_of(raw: dict[str, Any], s0: np.ndarray) -> dict[str, np.ndarray]:
    """For each interval table, the step each interval starts in (before the first step: step 0)."""
    out = {}
    for a_key, _ in TABLES:
        if a_key in raw and len(raw[a_key]):
            a = np.asarray(raw[a_key], np.int64)
            out[a_key] = np.clip(np.searchsorted(s0, a, side="right") - 1, 0, max(0, len(s0) - 1))
    return out


def _choose(
    raw: dict[str, Any], s0: np.ndarray, wall: np.ndarray, budget: int
) -> tuple[dict[str, np.ndarray], np.ndarray, str]:
    """Which intervals go in (a mask per table), which steps' intervals the trace holds, and why
    the others are not in it ("" when every step's are)."""
    n = len(s0)
    of = _step_of(raw, s0)
    counts = np.zeros(n, dtype=np.int64)
    for idx in of.values():
        counts += np.bincount(idx, minlength=n)
    if "detail_through" in raw:
        # What the recording kept: every step up to its cap, the window past it, and unsettled steps.
        through, settled = int(raw["detail_through"]), int(raw["detail_settled"])
        kept = np.zeros(n, dtype=bool)
        kept[:through] = True
        kept[np.asarray(raw["detail_window"], np.int64)[np.asarray(raw["detail_window"]) < n]] = True
        kept[settled:] = True
        why = (
            ""
            if kept.all()
            else (
                f"the run kept every step's intervals for its first {through} steps (the cap: "
                f"{int(raw['detail_cap_steps'])} steps or {int(raw['detail_cap_rows'])} intervals, to bound "
                f"memory and this file), then only those of a window: the slowest step, the median and last "
                f"of the latest settled chunk"
            )
        )
    else:
        kept = counts > 0
        why = "" if kept.all() else "only the steps whose intervals the recording kept"
    if counts.sum() > budget:
        picks = _window(wall, np.flatnonzero(kept))
        k = int(np.searchsorted(np.cumsum(counts * kept), max(0, budget - int(counts[picks].sum())), side="right"))
        keep = np.zeros(n, dtype=bool)
        keep[:k] = True
        keep[picks] = True
        kept &= keep
        why = (why + "; " if why else "") + (
            f"this trace holds at most {budget} intervals for this process: those of the steps "
            f"before step {k} and of the slowest, a median and the last step"
        )
    masks = {a_key: kept[idx] for a_key, idx in of.items()}
    return masks, kept, why


def _step_events(
    steps, s0: np.ndarray, wall: np.ndarray, pid: int, t0: int, kept: np.ndarray, max_step_events: int
) -> tuple[list[dict], str]:
    """The steps track: every step, or past max_step_events bins of consecutive steps (mean ms),
    and then the steps whose intervals are in the trace on a thread of their own."""
    n = len(s0)
    ms_cols = [c for c in steps.columns if c.endswith("_ms")]
    vals = {c: steps[c].to_numpy(dtype=np.float64)[:n] for c in ms_cols}
    numbers = steps["step"].to_numpy()[:n] if "step" in steps else np.arange(n)
    events: list[dict] = [{"name": "thread_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "steps"}}]
    # Each figure made once per column as Python numbers, by the float operations a step at a time made:
    # an event is then a dict of ready values, not numpy scalars and a round() per column.
    ts = (s0 - t0) / 1e3

    def track(idx: np.ndarray, tid: int) -> list[dict]:
        args = _rounded({c: v[idx] for c, v in vals.items()}, len(idx))
        nums, at, dur = numbers[idx].astype(np.int64).tolist(), ts[idx].tolist(), (wall[idx] / 1e3).tolist()
        return [_complete(f"step {k}", pid, tid, "step", t, d, a) for k, t, d, a in zip(nums, at, dur, args)]

    if n <= max_step_events:
        return events + track(np.arange(n), 0), "every step"
    size = -(-n // max_step_events)
    firsts = np.arange(0, n, size)
    lasts = np.minimum(firsts + size, n) - 1
    mean = {f"mean_{c}": np.add.reduceat(np.nan_to_num(vals[c]), firsts) / (lasts - firsts + 1) for c in ms_cols}
    bins = zip(
        numbers[firsts].astype(np.int64).tolist(),
        numbers[lasts].astype(np.int64).tolist(),
        ts[firsts].tolist(),
        ((s0[lasts] + wall[lasts] - t0) / 1e3 - ts[firsts]).tolist(),
        (lasts - firsts + 1).tolist(),
        _rounded(mean, len(firsts)),
    )
    events += [_complete(f"steps {a}-{b}", pid, 0, "steps", t, d, {"steps": k, **m}) for a, b, t, d, k, m in bins]
    events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": 1, "args": {"name": "steps with intervals"}})
    # Bounded by the recording's cap (analysis.detail) and the trace's interval budget, not by n.
    events += track(np.flatnonzero(kept), 1)
    return events, f"bins of {size} consecutive steps (mean ms), and each step whose intervals are in the trace"


def _rounded(cols: dict[str, np.ndarray], n: int) -> list[dict[str, float]]:
    """n row dicts of the columns, each value round(x, 3) as Python rounds it: a list of floats per
    column, then a dict per row from a zip, no call per value."""
    if not cols:
        return [{} for _ in range(n)]
    return [dict(zip(cols, row)) for row in zip(*(round_ms(v).tolist() for v in cols.values()))]


# Past this, x * 1000 no longer holds x's thousandths exactly enough to round by (2**52 / 1000).
_ROUND_EXACT_BELOW = 4.5e12


def round_ms(x: np.ndarray) -> np.ndarray:
    """round(v, 3) for each v, as Python's round gives it (the double nearest to the decimal rounded half
    to even), made by numpy: rint(v * 1000) / 1000 is that same double wherever v * 1000's own rounding
    error cannot move it across a half; the few values near a half, and huge ones, are rounded by Python."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = x * 1000.0
        out = np.rint(scaled) / 1000.0
        half_gap = np.abs(scaled - np.floor(scaled) - 0.5)
        doubtful = ~(half_gap > np.abs(scaled) * 1e-15 + 1e-300) & np.isfinite(x) | (np.abs(x) >= _ROUND_EXACT_BELOW)
    idx = np.flatnonzero(doubtful)
    out[idx] = [round(v, 3) for v in x[idx].tolist()]
    return out


def line_events(
    raw: dict[str, Any], s0: np.ndarray, wall: np.ndarray, kept: np.ndarray, numbers: np.ndarray, pid: int, t0: int
) -> list[dict]:
    """The host-line samples that fall in the steps whose intervals are in the trace, as instant events on
    the training thread's track (its OS id, as the spans have it), at most MAX_LINE_EVENTS. A sample whose
    site is not in the table (a damaged file) is left out."""
    if "line_t_ns" not in raw or not len(s0):
        return []
    # A part's arrays are read back from a folder: only 1-d integer columns of matching lengths are drawn.
    cols = [np.asarray(raw.get(k, ())) for k in ("line_t_ns", "line_site", "line_line", "line_tid")]
    if any(c.dtype.kind not in "iu" for c in cols) or [c.ndim for c in cols] != [1, 1, 1, 0]:
        return []
    t, site, nums = cols[0].astype(np.int64), cols[1].astype(np.int64), cols[2]
    files, funcs, user = (np.asarray(raw.get(k, ())).reshape(-1) for k in ("line_file", "line_function", "line_user"))
    if not (len(t) == len(site) and len(files) == len(funcs) == len(nums) == len(user)):
        return []
    k = np.searchsorted(s0, t, side="right") - 1
    ok = (k >= 0) & (site >= 0) & (site < len(files))
    ok[ok] = (t[ok] < s0[k[ok]] + wall[k[ok]]) & kept[k[ok]]
    tid = int(cols[3])
    out: list[dict] = []
    if not tid:  # no OS id for the training thread: a track of its own
        tid = -1
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": "host lines (sampled)"}})
    names = [f"{fn} ({Path(str(f)).name}:{int(n)})" for f, fn, n in zip(files, funcs, nums)]
    for i in np.flatnonzero(ok)[:MAX_LINE_EVENTS]:
        j = int(site[i])
        out.append(
            {
                "name": names[j],
                "ph": "i",
                "s": "t",
                "pid": pid,
                "tid": tid,
                "cat": "line",
                "ts": (int(t[i]) - t0) / 1e3,
                "args": {
                    "file": str(files[j]),
                    "line": int(nums[j]),
                    "user": bool(user[j]),
                    "step": int(numbers[k[i]]),
                },
            }
        )
    return out


def build_trace(
    parts: list[Part], max_events: int = MAX_EVENTS, max_step_events: int = MAX_STEP_EVENTS
) -> dict[str, Any]:
    """parts: one per process (its label, host, trace.npz arrays as `raw` and steps table)."""
    about: list[dict] = []
    events = [e for chunk in _events(parts, max_events, max_step_events, about) for e in chunk]
    return {"traceEvents": events, **_after_events(parts, about)}


def _t0(parts: list[Part]) -> int:
    return min((int(p.raw["step_start_ns"][0]) for p in parts if len(p.raw["step_start_ns"])), default=0)


def _after_events(parts: list[Part], about: list[dict]) -> dict[str, Any]:
    # windowed: some step of some process has no intervals in the trace (its step event is there).
    return {
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": "perfcore",
            "windowed": any(a["steps_without_intervals"] for a in about),
            "clock": "CLOCK_MONOTONIC",
            "origin_ns": _t0(parts),
            "processes": about,
        },
    }


def _events(parts: list[Part], max_events: int, max_step_events: int, about: list[dict]) -> Iterator[list[dict]]:
    """The trace's events a list at a time (each process's tracks, its intervals in lists of at most
    _WRITE_EVENTS), appending each process's description to `about`: a writer holds one list."""
    t0 = _t0(parts)
    budget = max(1, max_events // max(1, len(parts)))
    # A job across machines: each process named with its node too.
    hosts = {p.host for p in parts}
    # Many ranks share the steps tracks' events as they share the intervals' (never under a bin per
    # STEP_EVENTS_FLOOR steps' worth).
    per_process = min(max_step_events, max(STEP_EVENTS_FLOOR, MAX_JOB_STEP_EVENTS // max(1, len(parts))))
    for i, p in enumerate(parts):
        raw, pid, gpu_pid = p.raw, 2 * i + 1, 2 * i + 2
        name = f"{p.label} ({p.host})" if len(hosts) > 1 else p.label
        yield [
            {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"{name} host"}},
            {"name": "process_name", "ph": "M", "pid": gpu_pid, "args": {"name": f"{name} GPU"}},
        ]
        # Views where the arrays are int64 already: a copy of every step's start and wall is 16 B a step.
        s0, wall = np.asarray(raw["step_start_ns"], np.int64), np.asarray(raw["step_wall_ns"], np.int64)
        n = min(len(s0), len(p.table))
        s0, wall = s0[:n], wall[:n]
        masks, kept, why = _choose(raw, s0, wall, budget)
        track, track_text = _step_events(p.table, s0, wall, pid, t0, kept, per_process)
        yield track
        del track
        about.append(
            {
                "label": p.label,
                "steps": int(n),
                "step_track": track_text,
                "steps_with_intervals": _ranges(kept),
                "steps_without_intervals": int(n - kept.sum()),
                "why": why or "every step's intervals are in the trace",
            }
        )
        numbers = p.table["step"].to_numpy()[:n] if "step" in p.table else np.arange(n)
        lines = line_events(raw, s0, wall, kept, numbers, pid, t0)
        about[-1]["line_samples"] = sum(1 for x in lines if x["ph"] == "i")
        yield lines
        del lines
        names = dict(zip(raw["phase_ids"].tolist(), raw["phase_names"].tolist()))
        yield from _chunks(_interval_events(raw, masks, names, pid, gpu_pid, t0))


def _picked(raw: dict[str, Any], key: str, mask: np.ndarray, dtype=np.int64) -> list:
    """One interval table's column, the intervals that go in, as Python values (no numpy scalar per event):
    integers unless dtype says otherwise (a part's arrays are read back from a folder)."""
    return np.asarray(raw[key])[mask].astype(dtype, copy=False).tolist()


def _times(raw: dict[str, Any], table: str, mask: np.ndarray, t0: int) -> tuple[list[float], list[float]]:
    """The intervals' ts and dur in us from the trace's origin: int64 ns differences, then one division each."""
    st = np.asarray(raw[f"{table}_start_ns"], np.int64)[mask]
    en = np.asarray(raw[f"{table}_end_ns"], np.int64)[mask]
    return ((st - t0) / 1e3).tolist(), ((en - st) / 1e3).tolist()


def _complete(name: str, pid: int, tid: int, cat: str, ts: float, dur: float, args: dict | None = None) -> dict:
    """A complete ("X") event, its keys in the order every trace of perfcore writes them."""
    event = {"name": name, "ph": "X", "pid": pid, "tid": tid, "cat": cat, "ts": ts, "dur": dur}
    if args is not None:
        event["args"] = args
    return event


def _interval_events(
    raw: dict[str, Any], masks: dict[str, np.ndarray], names: dict[int, str], pid: int, gpu_pid: int, t0: int
) -> Iterator[dict]:
    """One process's intervals as trace events: host spans, then kernels, copies and the GPU's phase events."""
    m = masks.get("span_start_ns", np.zeros(0, bool))
    ts, dur = _times(raw, "span", m, t0)
    for ph, t, d, tid, step in zip(
        _picked(raw, "span_phase", m), ts, dur, _picked(raw, "span_thread", m), _picked(raw, "span_step", m)
    ):
        yield _complete(names.get(ph, str(ph)), pid, tid, "host", t, d, {"step": step})
    if "kernel_start_ns" in masks:
        m = masks["kernel_start_ns"]
        ts, dur = _times(raw, "kernel", m, t0)
        for nm, t, d, stream in zip(_picked(raw, "kernel_name", m, str), ts, dur, _picked(raw, "kernel_stream", m)):
            yield _complete(nm, gpu_pid, stream, "kernel", t, d)
    if "memcpy_start_ns" in masks:
        m = masks["memcpy_start_ns"]
        ts, dur = _times(raw, "memcpy", m, t0)
        cols = (
            _picked(raw, f"memcpy_{c}", m, kind)
            for c, kind in (("direction", str), ("stream", np.int64), ("bytes", np.int64), ("pageable", bool))
        )
        for t, d, (direction, stream, nb, pg) in zip(ts, dur, zip(*cols)):
            name = f"memcpy {direction}" + (" (pageable)" if pg else "")
            yield _complete(name, gpu_pid, stream, "memcpy", t, d, {"bytes": nb})
    if "event_start_ns" in masks:
        m = masks["event_start_ns"]
        ts, dur = _times(raw, "event", m, t0)
        for ph, t, d in zip(_picked(raw, "event_phase", m), ts, dur):
            yield _complete(f"{names.get(ph, ph)} (GPU)", gpu_pid, 0, "gpu", t, d)


def _chunks(events: Iterator[dict]) -> Iterator[list[dict]]:
    """Lists of at most _WRITE_EVENTS events (one list at least, perhaps empty): a writer holds one list."""
    import itertools

    while True:
        chunk = list(itertools.islice(events, _WRITE_EVENTS))
        yield chunk
        if len(chunk) < _WRITE_EVENTS:
            return


def write_trace(
    path: Path, parts: list[Part], max_events: int = MAX_EVENTS, max_step_events: int = MAX_STEP_EVENTS
) -> dict[str, Any]:
    """trace.json: the bytes json.dumps(build_trace(...)) would make, written a list of events at a
    time: the whole trace (its events as objects, its text, the text's bytes) was the largest thing
    finishing held at 300k steps. Returns the trace's otherData."""
    from perfcore import jsonio

    about: list[dict] = []
    sep = (",", ":")
    with jsonio.atomic_path(Path(path)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write('{"traceEvents":[')
        first = True
        for chunk in _events(parts, max_events, max_step_events, about):
            if chunk:
                fh.write(("" if first else ",") + json.dumps(chunk, separators=sep)[1:-1])
                first = False
        rest = _after_events(parts, about)
        fh.write("]," + json.dumps(rest, separators=sep)[1:])
        fh.flush()
        os.fsync(fh.fileno())  # as jsonio.write_bytes: a full disk can show only here
    return rest["otherData"]
