"""Accuracy checks against kernels of known duration: how far perfcore's GPU timers are from truth.

Used by bench/gpu_check.py and the `cuda` tests (tests/test_gpu.py), never by perfcore itself, so
it lives here, outside the package; each function needs a GPU and raises DeviceUnavailable (one
line, with the reason) where there is none.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from perfcore._native import require_cuda, require_cupti

__all__ = [
    "EVENT_RESOLUTION_NS",
    "duration_tolerance_ns",
    "event_timer_error",
    "cupti_kernel_error",
    "memcpy_kinds",
    "copy_bandwidth",
    "launch_overhead_us",
    "spin_kernels",
    "phase_tagging",
    "graph_kernels",
    "many_kernels",
    "events_from_threads",
    "peak_memory_kept",
    "event_clock_drift",
    "event_bracket_ns",
    "event_starts_vs_cupti",
    "copies_vs_events",
    "long_graph_capture",
]

# cudaEventElapsedTime: "this value has a resolution of around 0.5 microseconds" (CUDA runtime
# API reference). CUPTI's kernel timestamps are finer, but both are compared against events here.
EVENT_RESOLUTION_NS = 500


def duration_tolerance_ns(requested_ns: float, spread_ns: float, rel: float = 0.01) -> float:
    """How far a median measured duration may sit from the requested one: `rel` of it, or, where
    that is finer than a measurement can be, two event resolutions (one per end) plus the
    measured spread (IQR of the repeats: a busy device's jitter is part of what is measured)."""
    return max(rel * requested_ns, 2 * EVENT_RESOLUTION_NS + spread_ns)


def _iqr(x) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float(np.percentile(x, 75) - np.percentile(x, 25)) if len(x) else float("nan")


def _stream():
    import torch

    torch.cuda.init()
    return torch.cuda.current_stream().cuda_stream


def _event_pairs(C, t, s, repeats: int, launch) -> np.ndarray:
    t.resolve(wait=True)
    # Queued behind a spin, every pair runs at the GPU's pace: an event pair then holds the
    # kernel and the GPU's own gaps around it, never the host's time between two launches (an
    # empty kernel's pairs, host-paced, read 10 us on the H200 where the GPU-paced gap is ~3 us).
    C.launch_spin(2_000_000, s)
    for i in range(repeats):
        t.begin(0, i, s)
        launch()
        t.end(0, s)
    return t.resolve(wait=True)["gpu_ns"].astype(np.float64)


def event_timer_error(durations_ns: Sequence[int] = (50_000, 1_000_000, 10_000_000), repeats: int = 20) -> list[dict]:
    """Event-timed spin kernels of known duration against the requested one. An event pair around
    one kernel also holds the GPU's gaps between the events and the kernel and the kernel's own
    start and end (~3 us on the H200): measured as the bracket of an empty kernel and expected on
    top of the spin. The tolerance: `duration_tolerance_ns` widened by the bracket's
    own spread."""
    C = require_cuda("event timer calibration")
    s = _stream()
    C.launch_empty(10, s)  # load the module before timing
    t = C.EventTimer()
    bracket = _event_pairs(C, t, s, repeats, lambda: C.launch_empty(1, s))
    bracket_ns, bracket_iqr = float(np.median(bracket)), _iqr(bracket)
    out = []
    for d in durations_ns:
        got = _event_pairs(C, t, s, repeats, lambda: C.launch_spin(int(d), s))
        med = float(np.median(got))
        tol = duration_tolerance_ns(d, _iqr(got) + bracket_iqr)
        err = med - bracket_ns - d
        out.append(
            {
                "requested_ns": int(d),
                "median_ns": med,
                "bracket_ns": bracket_ns,
                "error_ns": err,
                "rel_error": abs(err) / d,
                "spread_ns": _iqr(got) + bracket_iqr,
                "tolerance_ns": tol,
                "ok": abs(err) <= tol,
            }
        )
    return out


def cupti_kernel_error(
    durations_ns: Sequence[int] = (50_000, 1_000_000, 10_000_000), repeats: int = 20
) -> dict[str, Any]:
    """CUPTI-recorded duration of spin kernels against the requested one; also the clock check
    (every kernel starts after its host launch and ends before the host saw it finish)."""
    C = require_cupti("CUPTI calibration")
    import torch

    from perfcore.capture.native_cupti import CuptiTracer

    s = _stream()
    C.launch_empty(10, s)
    torch.cuda.synchronize()
    windows = []
    with CuptiTracer() as tr:
        for d in durations_ns:
            for _ in range(repeats):
                t0 = C.now_ns()
                C.launch_spin(int(d), s)
                torch.cuda.synchronize()
                windows.append((int(d), t0, C.now_ns()))
    k = tr.frames["kernels"]
    spins = k[k["name"].astype(str).str.contains("spinKernel")].sort_values("start_ns")
    rows = []
    for d in durations_ns:
        sel = spins[np.isclose(spins["duration_ns"], d, rtol=0.5)]
        med = float(np.median(sel["duration_ns"])) if len(sel) else float("nan")
        tol = duration_tolerance_ns(d, _iqr(sel["duration_ns"]))
        rows.append(
            {
                "requested_ns": int(d),
                "kernels": int(len(sel)),
                "median_ns": med,
                "rel_error": abs(med - d) / d,
                "tolerance_ns": tol,
                "ok": bool(abs(med - d) <= tol),
            }
        )
    on_clock = 0
    starts, ends = spins["start_ns"].to_numpy(), spins["end_ns"].to_numpy()
    for (_, t0, t1), ks, ke in zip(windows, starts, ends):
        on_clock += int(t0 <= ks and ke <= t1)
    return {
        "durations": rows,
        "kernels_total": int(len(spins)),
        "launches": len(windows),
        "on_clock": on_clock,
        "stats": tr.stats,
    }


def memcpy_kinds(size_bytes: int = 16 << 20) -> dict[str, Any]:
    """Copies from pageable and pinned tensors, traced: are they flagged as such?"""
    require_cupti("memcpy classification")
    import torch

    from perfcore.capture.native_cupti import CuptiTracer

    pageable = torch.empty(size_bytes // 4, dtype=torch.float32)
    pinned = torch.empty(size_bytes // 4, dtype=torch.float32).pin_memory()
    torch.cuda.synchronize()
    with CuptiTracer() as tr:
        pageable.cuda()
        torch.cuda.synchronize()
        pinned.cuda(non_blocking=True)
        torch.cuda.synchronize()
    m = tr.frames["memcpy"]
    h2d = m[(m["direction"] == "h2d") & (m["size_bytes"] == size_bytes)].sort_values("start_ns")
    return {
        "copies": int(len(h2d)),
        "src_kinds": [str(x) for x in h2d["src"]],
        "correct": len(h2d) == 2 and list(h2d["src"].astype(str)) == ["pageable", "pinned"],
    }


def copy_bandwidth(size_bytes: int = 256 << 20, repeats: int = 10) -> dict[str, float]:
    """GB/s (1e9 bytes/s, median of repeats) for pinned and pageable, both directions."""
    C = require_cuda("copy bandwidth")
    s = _stream()
    out = {}
    for direction in ("h2d", "d2h"):
        for pinned in (True, False):
            cols = C.measure_copies([size_bytes], direction, pinned, repeats, s)
            out[f"{direction}_{'pinned' if pinned else 'pageable'}_gbps"] = size_bytes / float(
                np.median(cols["gpu_ns"])
            )
    return out


def launch_overhead_us(count: int = 2000) -> dict[str, float]:
    C = require_cuda("launch overhead")
    o = C.measure_launch_overhead(count, _stream())
    return {"host_us_per_launch": o["host_ns_per_launch"] / 1e3, "gpu_us_per_kernel": o["gpu_ns_per_kernel"] / 1e3}


def _tracer(backend: str, **kw):
    if backend == "cupti-python":
        from perfcore.capture.cupti_python import CuptiPythonTracer

        return CuptiPythonTracer(**kw)
    from perfcore.capture.native_cupti import CuptiTracer

    return CuptiTracer(**kw)


def spin_kernels(
    backend: str, durations_ns: Sequence[int] = (1_000_000, 5_000_000), repeats: int = 20
) -> dict[str, Any]:
    """The calibration spin kernels traced by one backend, each also timed by a CUDA event pair:
    count and median duration per requested length, the event-timed median, and the drain cost
    per record (decode time / records) of the backend."""
    C = require_cupti("backend calibration")
    import torch

    s = _stream()
    C.launch_empty(10, s)
    torch.cuda.synchronize()
    ev = C.EventTimer()
    with _tracer(backend) as tr:
        for i, d in enumerate(durations_ns):
            for _ in range(repeats):
                ev.begin(i, 0, s)
                C.launch_spin(int(d), s)
                ev.end(i, s)
        torch.cuda.synchronize()
    k = tr.frames["kernels"]
    spins = k[k["name"].astype(str).str.contains("spinKernel")]
    e = ev.resolve(wait=True)
    rows = []
    for i, d in enumerate(durations_ns):
        sel = spins[np.isclose(spins["duration_ns"], d, rtol=0.5)]
        rows.append(
            {
                "requested_ns": int(d),
                "kernels": int(len(sel)),
                "median_ns": float(np.median(sel["duration_ns"])) if len(sel) else float("nan"),
                "event_median_ns": float(np.median(e["gpu_ns"][e["phase_id"] == i])),
            }
        )
    st = tr.stats
    return {
        "backend": backend,
        "durations": rows,
        "records": int(st.get("records", 0)),
        "decode_ns_per_record": st.get("decode_ns", 0) / max(1, int(st.get("records", 0))),
        "dropped": int(st.get("dropped_records", 0)),
    }


def phase_tagging(launches_per_phase: int = 500, phases: int = 4) -> dict[str, Any]:
    """Kernels launched inside tagged phases (training thread) and a backward pass (autograd's
    thread, no id pushed there), traced: the share of each phase's kernels attributed to it."""
    C = require_cupti("phase tagging check")
    import torch

    import pandas as pd

    from perfcore.capture.launches import LaunchPhases
    from perfcore.capture.native_cupti import CuptiTracer

    s = _stream()
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)]).cuda()
    x = torch.randn(64, 256, device="cuda")
    model(x).sum().backward()  # autograd's device thread exists from here on
    torch.cuda.synchronize()
    rec = C.SpanRecorder()
    ids = [16 + i for i in range(phases)]
    scopes = [C.phase_scope(C.PhaseScope, rec, pid, None, s, True) for pid in ids]
    bwd = C.phase_scope(C.PhaseScope, rec, 99, None, s, True)
    with CuptiTracer() as tr:
        for scope in scopes:
            with scope:
                C.launch_empty(launches_per_phase, s)
        C.launch_empty(launches_per_phase, s)  # outside every phase
        loss = model(x).sum()
        with bwd:
            loss.backward()
        torch.cuda.synchronize()
    lp = LaunchPhases()
    lp.add(tr.frames, pd.DataFrame(rec.drain()))
    k = tr.frames["kernels"]
    phase = lp.phase_of(k["correlation_id"].to_numpy())
    empty = k["name"].astype(str).str.contains("emptyKernel").to_numpy()
    # Kernels of the backward pass: those whose launch (API record) came from another thread.
    api = tr.frames["api"]
    main_tid = int(api.loc[api["correlation_id"].isin(k.loc[empty, "correlation_id"]), "thread_id"].mode().iloc[0])
    other = set(api.loc[api["thread_id"] != main_tid, "correlation_id"].tolist())
    from_autograd = k["correlation_id"].isin(other).to_numpy() & ~empty
    per_phase = {pid: float((phase[empty] == pid).sum()) / launches_per_phase for pid in ids}
    outside = float((phase[empty] == -1).sum()) / launches_per_phase
    return {
        "per_phase": per_phase,
        "outside_untagged": outside,
        "autograd_kernels": int(from_autograd.sum()),
        "autograd_attributed": float((phase[from_autograd] == 99).mean()) if from_autograd.any() else float("nan"),
    }


def _graph_of_empty_kernels(C, nodes: int):
    """A CUDA graph of `nodes` empty kernels, captured on a side stream (torch's capture rule)."""
    import torch

    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        C.launch_empty(1, side.cuda_stream)  # warm up outside capture
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=side):
            C.launch_empty(nodes, side.cuda_stream)
    torch.cuda.synchronize()
    return g


def graph_kernels(nodes: int = 50, replays: int = 20, sessions: int = 1) -> dict[str, Any]:
    """A CUDA graph of `nodes` kernels, captured before any tracing, replayed in two tagged phases
    (42 then 43, half the replays each) in each of `sessions` tracing sessions, behind a 5 ms spin
    so the CPU runs ahead and every replay runs after both phases' launches. One correlation id
    covers every kernel of a replay; after the first session, a CUPTI with the graph-id bug gets
    graph kernels placed by launch order. Per session: kernels seen, launch ids, the share placed
    in the phase that launched its replay (the replays run in launch order on one stream, so the
    first half of the kernels by start are phase 42's); session 1's on top."""
    C = require_cupti("graph launch check")
    import numpy as np
    import pandas as pd
    import torch

    from perfcore.capture.launches import LaunchPhases
    from perfcore.capture.native_cupti import CuptiTracer

    g = _graph_of_empty_kernels(C, nodes)
    first = replays // 2
    out = []
    for _ in range(sessions):
        rec = C.SpanRecorder()
        with CuptiTracer() as tr:
            C.launch_spin(5_000_000, torch.cuda.current_stream().cuda_stream)
            for phase, n in ((42, first), (43, replays - first)):
                with C.phase_scope(C.PhaseScope, rec, phase, None, None, True):
                    for _ in range(n):
                        g.replay()
            torch.cuda.synchronize()
        k = tr.frames["kernels"]
        k = k[k["graph_id"] != 0].sort_values("start_ns", kind="stable")
        lp = LaunchPhases()
        lp.trust_graph_ids = not tr.stats.get("graph_ids_untrusted", False)
        lp.add(tr.frames, pd.DataFrame(rec.drain()))
        nodes_of = k["graph_node_id"].to_numpy() if "graph_node_id" in k else None
        phase = lp.phase_of(
            k["correlation_id"].to_numpy(), k["graph_id"].to_numpy(), k["start_ns"].to_numpy(), nodes_of
        )
        want = np.where(np.arange(len(k)) < first * nodes, 42, 43)
        out.append(
            {
                "seen": int(len(k)),
                "launch_ids": int(k["correlation_id"].nunique()),
                "attributed": float((phase == want).mean()) if len(k) else 0.0,
                "by_order": not lp.trust_graph_ids,
            }
        )
    return {"expected": nodes * replays, "replays": replays, **out[0], "sessions": out}


def many_kernels(n: int = 100_000, buffer_bytes: int = 1 << 20, max_buffers: int = 8) -> dict[str, Any]:
    """n kernels through a pool far smaller than their records (so only continuous draining keeps
    up): kernels seen, records dropped, buffers, flush and decode time."""
    C = require_cupti("drop check")
    import torch

    from perfcore.capture.native_cupti import CuptiTracer

    s = _stream()
    C.launch_empty(10, s)
    torch.cuda.synchronize()
    t0 = C.now_ns()
    with CuptiTracer(buffer_bytes=buffer_bytes, max_buffers=max_buffers, drain_period_ms=20) as tr:
        for _ in range(n // 1000):
            C.launch_empty(1000, s)
        torch.cuda.synchronize()
    k = tr.frames["kernels"]
    st = tr.stats
    return {
        "launched": n,
        "seen": int(k["name"].astype(str).str.contains("emptyKernel").sum()),
        "dropped": int(st.get("dropped_records", 0)) + int(st.get("overflow_records", 0)),
        "buffers_denied": int(st.get("buffers_denied", 0)),
        "buffers": int(st.get("buffers_completed", 0)),
        "pool_bytes": buffer_bytes * max_buffers,
        "flush_ms": st.get("flush_ns", 0) / 1e6,
        "decode_ms": st.get("decode_ns", 0) / 1e6,
        "wall_ms": (C.now_ns() - t0) / 1e6,
    }


def events_from_threads(threads: int = 4, pairs: int = 2000) -> dict[str, Any]:
    """Phases opened and closed on several threads at once while another thread resolves (the
    GIL released): every pair comes back, each under the thread that opened it."""
    C = require_cuda("event timer threads check")
    import threading

    s = _stream()
    t = C.EventTimer()
    errors: list[str] = []
    stop = threading.Event()
    got: list[dict] = []

    def work(pid):
        try:
            for i in range(pairs):
                t.begin(pid, i, s)
                t.begin(pid + 100, i, s)  # nested on the same thread
                t.end(pid + 100, s)
                t.end(pid, s)
        except Exception as e:  # a race shows up as a UsageError for a phase "not open on this thread"
            errors.append(f"{type(e).__name__}: {e}")

    def resolver():
        while not stop.is_set():
            got.append(t.resolve(wait=False))

    r = threading.Thread(target=resolver)
    r.start()
    ws = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    stop.set()
    r.join()
    got.append(t.resolve(wait=True))
    phase = np.concatenate([g["phase_id"] for g in got])
    tids = np.concatenate([g["thread_id"] for g in got])
    per_thread_ok = all(len(set(tids[(phase == i) | (phase == i + 100)].tolist())) == 1 for i in range(threads))
    return {
        "expected": threads * pairs * 2,
        "resolved": int(len(phase)),
        "errors": errors[:3],
        "one_thread_per_phase": per_thread_ok,
        "clock": t.clock_sync(),
    }


def peak_memory_kept() -> dict[str, Any]:
    """The script's own max_memory_allocated() after per-step peaks were taken, vs without."""
    require_cuda("peak memory check")
    import torch

    from perfcore.capture.peak_memory import PeakMemory

    torch.cuda.reset_peak_memory_stats()
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    del big
    truth = torch.cuda.max_memory_allocated()
    pm = PeakMemory().install()
    try:
        steps = []
        for n in (1 << 20, 2 << 20):
            x = torch.empty(n, dtype=torch.uint8, device="cuda")
            del x
            steps.append(pm.step_peak())
        seen = torch.cuda.max_memory_allocated()
    finally:
        pm.uninstall()
    return {"user_peak": int(seen), "truth": int(truth), "step_peaks": steps}


def event_clock_drift(seconds: float = 3.0, every_s: float = 0.1) -> dict[str, Any]:
    """Phases recorded for `seconds` and resolved as a timer does; the event clock is re-tied to
    the host clock every second: the largest gap found at a re-sync (the drift)."""
    C = require_cuda("event clock drift")
    import time

    s = _stream()
    t = C.EventTimer()
    t0 = time.perf_counter()
    i = 0
    while time.perf_counter() - t0 < seconds:
        t.begin(0, i, s)
        C.launch_spin(100_000, s)
        t.end(0, s)
        t.resolve(wait=False)
        time.sleep(every_s)
        i += 1
    t.resolve(wait=True)
    c = t.clock_sync()
    return dict(c, seconds=time.perf_counter() - t0)


def event_bracket_ns(repeats: int = 20) -> dict[str, float]:
    """The GPU time an event pair adds around a kernel: an empty kernel's pair, GPU-paced (median, IQR)."""
    C = require_cuda("event bracket")
    s = _stream()
    C.launch_empty(10, s)
    got = _event_pairs(C, C.EventTimer(), s, repeats, lambda: C.launch_empty(1, s))
    return {"bracket_ns": float(np.median(got)), "iqr_ns": _iqr(got)}


def event_starts_vs_cupti(kernels: int = 20, spin_ns: int = 100_000, gap_s: float = 0.002) -> dict[str, Any]:
    """Spin kernels, each in an event pair and traced by CUPTI, launched apart (the GPU idle between):
    each event-placed start and end (the event timer's anchor on the perfcore clock) against CUPTI's
    start and end of the same kernel. deltas: CUPTI start - event start and event end - CUPTI end, ns."""
    C = require_cupti("event start check")
    import time

    import torch

    from perfcore.capture.native_cupti import CuptiTracer

    s = _stream()
    C.launch_empty(10, s)
    torch.cuda.synchronize()
    ev = C.EventTimer()
    with CuptiTracer() as tr:
        for i in range(kernels):
            ev.begin(7, i, s)
            C.launch_spin(int(spin_ns), s)
            ev.end(7, s)
            torch.cuda.synchronize()
            time.sleep(gap_s)
    e = ev.resolve(wait=True)
    k = tr.frames["kernels"]
    k = k[k["name"].astype(str).str.contains("spinKernel")].sort_values("start_ns")
    order = np.argsort(e["step"])
    starts, ends = np.asarray(e["gpu_start_ns"])[order], np.asarray(e["gpu_end_ns"])[order]
    n = min(len(k), len(starts))
    ks, ke = k["start_ns"].to_numpy()[:n], k["end_ns"].to_numpy()[:n]
    return {
        "kernels": int(len(k)),
        "pairs": int(len(starts)),
        "start_deltas_ns": (ks - starts[:n]).astype(float).tolist(),
        "end_deltas_ns": (ends[:n] - ke).astype(float).tolist(),
        "clock": ev.clock_sync(),
    }


def copies_vs_events(size_bytes: int = 64 << 20, repeats: int = 10) -> dict[str, Any]:
    """perfcore.transfer.measure's GB/s against copy_ timed by torch.cuda.Event pairs (median of
    `repeats`), for pinned and pageable memory in both directions."""
    require_cuda("copy bandwidth check")
    import torch

    from perfcore.experiments.transfer import measure

    ours = measure([size_bytes], ("h2d", "d2h"), repeats)
    n = size_bytes // 4
    dev = torch.empty(n, dtype=torch.float32, device="cuda")
    out = []
    for direction in ("h2d", "d2h"):
        for memory in ("pinned", "pageable"):
            host = torch.empty(n, dtype=torch.float32, pin_memory=memory == "pinned")
            dst, src = (dev, host) if direction == "h2d" else (host, dev)
            ms = []
            for _ in range(repeats + 1):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                dst.copy_(src, non_blocking=memory == "pinned")
                b.record()
                b.synchronize()
                ms.append(a.elapsed_time(b))
            ref = size_bytes / (float(np.median(ms[1:])) * 1e6)
            row = ours[(ours["direction"] == direction) & (ours["memory"] == memory)]
            out.append(
                {
                    "direction": direction,
                    "memory": memory,
                    "perfcore_gbps": float(row["gbps"].iloc[0]) if len(row) else float("nan"),
                    "events_gbps": ref,
                    "events_iqr_ms": _iqr(ms[1:]),
                }
            )
    return {"size_bytes": size_bytes, "rows": out}


def long_graph_capture(
    capture_s: float = 0.25, nodes: int = 50, replays: int = 10, drain_period_ms: int = 20
) -> dict[str, Any]:
    """A CUDA graph whose capture lasts longer than `capture_s` (the host sleeps between its launches)
    while StepTimer(kernels=True) traces with a `drain_period_ms` drain, so the drain's flush runs
    during the capture; then the graph replayed in compute phases. The capture must hold, the replays
    must compute what eager does, and every replayed kernel must be traced."""
    require_cupti("long graph capture check")
    import time

    import torch

    import perfcore
    import perfcore.capture.native_cupti as nc
    from perfcore._native import native

    made = nc.CuptiTracer.__init__
    periods: list[int] = []

    def with_period(self, *a, **kw):  # the check's own drain period for the timer's tracer
        kw["drain_period_ms"] = drain_period_ms
        made(self, *a, **kw)
        periods.append(self.drain_period_ms)

    nc.CuptiTracer.__init__ = with_period
    try:
        t = perfcore.StepTimer(device="cuda", warmup=0, kernels=True)
    finally:
        nc.CuptiTracer.__init__ = made
    x = torch.ones(1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    error = None
    t0 = time.perf_counter()
    flushes0 = int(native().cupti_stats().get("flushes", 0))
    try:
        with torch.cuda.stream(side):
            y = x * 1.0
            torch.cuda.synchronize()
            with torch.cuda.graph(g, stream=side):
                y = x * 1.0
                for _ in range(nodes - 1):
                    y = y * 1.0001
                    time.sleep(capture_s / nodes)
    except Exception as e:  # the capture broken by the drain: this check's finding
        error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    capture_ms = (time.perf_counter() - t0) * 1e3
    stats = native().cupti_stats()
    flushes = int(stats.get("flushes", 0)) - flushes0
    torch.cuda.synchronize()
    want = float(1.0001 ** (nodes - 1))
    got = []
    if error is None:
        for _ in range(replays):
            with t.compute():
                g.replay()
            torch.cuda.synchronize()
            got.append(float(y[0]))
            t.step()
    t.result()
    agg = t.engine.store.kernel_agg
    traced = sum(c for _, (c, _) in agg.items())
    t.close()
    return {
        "error": error,
        "capture_ms": capture_ms,
        "drain_period_ms": periods[0] if periods else None,
        "backend": t.backend,
        "flushes_during": flushes,
        # The drain holds its flush while a capture is underway: the ticks it held are the evidence
        # that it met the capture and let it be.
        "flushes_held": int(stats.get("flushes_held", 0)),
        "captures_seen": int(stats.get("captures_seen", 0)),
        "replays": len(got),
        "right": bool(got) and all(abs(v - want) <= 1e-3 * want for v in got),
        "kernels_traced": int(traced),
        "kernels_expected": nodes * replays,
    }
