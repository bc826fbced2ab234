"""Accuracy checks against kernels of known duration: how far perfcore's GPU timers are from truth.

Used by bench/gpu_check.py and the `cuda` tests; each function needs a GPU and raises
DeviceUnavailable (one line, with the reason) where there is none.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from perfcore._native import require_cuda, require_cupti

__all__ = ["event_timer_error", "cupti_kernel_error", "memcpy_kinds", "copy_bandwidth", "launch_overhead_us"]


def _stream():
    import torch

    torch.cuda.init()
    return torch.cuda.current_stream().cuda_stream


def event_timer_error(durations_ns: Sequence[int] = (50_000, 1_000_000, 10_000_000), repeats: int = 20) -> list[dict]:
    """Median |event-timed - requested| / requested for spin kernels of known duration."""
    C = require_cuda("event timer calibration")
    s = _stream()
    C.launch_empty(10, s)  # load the module before timing
    out = []
    for d in durations_ns:
        t = C.EventTimer()
        for i in range(repeats):
            t.begin(0, i, s)
            C.launch_spin(int(d), s)
            t.end(0, s)
        got = t.resolve(wait=True)["gpu_ns"].astype(np.float64)
        med = float(np.median(got))
        out.append({"requested_ns": int(d), "median_ns": med, "rel_error": abs(med - d) / d})
    return out


def cupti_kernel_error(durations_ns: Sequence[int] = (50_000, 1_000_000, 10_000_000), repeats: int = 20) -> dict[str, Any]:
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
        rows.append({"requested_ns": int(d), "kernels": int(len(sel)), "median_ns": med, "rel_error": abs(med - d) / d})
    on_clock = 0
    starts, ends = spins["start_ns"].to_numpy(), spins["end_ns"].to_numpy()
    for (_, t0, t1), ks, ke in zip(windows, starts, ends):
        on_clock += int(t0 <= ks and ke <= t1)
    return {"durations": rows, "kernels_total": int(len(spins)), "launches": len(windows),
            "on_clock": on_clock, "stats": tr.stats}


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
    return {"copies": int(len(h2d)), "src_kinds": [str(x) for x in h2d["src"]],
            "correct": len(h2d) == 2 and list(h2d["src"].astype(str)) == ["pageable", "pinned"]}


def copy_bandwidth(size_bytes: int = 256 << 20, repeats: int = 10) -> dict[str, float]:
    """GB/s (1e9 bytes/s, median of repeats) for pinned and pageable, both directions."""
    C = require_cuda("copy bandwidth")
    s = _stream()
    out = {}
    for direction in ("h2d", "d2h"):
        for pinned in (True, False):
            cols = C.measure_copies([size_bytes], direction, pinned, repeats, s)
            out[f"{direction}_{'pinned' if pinned else 'pageable'}_gbps"] = size_bytes / float(np.median(cols["gpu_ns"]))
    return out


def launch_overhead_us(count: int = 2000) -> dict[str, float]:
    C = require_cuda("launch overhead")
    o = C.measure_launch_overhead(count, _stream())
    return {"host_us_per_launch": o["host_ns_per_launch"] / 1e3, "gpu_us_per_kernel": o["gpu_ns_per_kernel"] / 1e3}
