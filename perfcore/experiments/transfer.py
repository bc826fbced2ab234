"""Host<->device copies: pinned vs pageable bandwidth, the cost of one batch, and whether
non_blocking=True really overlaps with a running kernel (measured, not assumed).

Python API: measure(...) -> DataFrame, batch_cost(shape, dtype) -> dict. Needs a GPU; without one
every function raises DeviceUnavailable with the reason. parse_sizes is pure and runs anywhere.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import numpy as np
import pandas as pd

from perfcore._native import require_cuda
from perfcore.errors import UsageError

__all__ = [
    "parse_sizes",
    "parse_shape",
    "measure",
    "batch_cost",
    "overlap_check",
    "nominal_link_gbps",
    "summarize_curve",
]

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "MIB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "GIB": 1 << 30,
}


def _size(tok: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", tok)
    if not m or m.group(2).upper() not in _UNITS:
        raise UsageError(f"not a size: {tok!r} (examples: 4K, 256M, 1G)")
    v = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if v <= 0:
        raise UsageError(f"sizes must be > 0 bytes, got {tok!r}")
    return v


def parse_sizes(text: str) -> list[int]:
    """'4K..1G' -> 4K, 16K, ..., 1G (x4 steps, the end included); '4K,1M,64M' -> those sizes."""
    text = text.strip()
    if ".." in text:
        lo_s, hi_s = text.split("..", 1)
        lo, hi = _size(lo_s), _size(hi_s)
        if lo > hi:
            raise UsageError(f"size range {text!r} runs backwards")
        out, v = [], lo
        while v < hi:
            out.append(v)
            v *= 4
        out.append(hi)
        return sorted(set(out))
    sizes = [_size(t) for t in text.split(",") if t.strip()]
    if not sizes:
        raise UsageError("no sizes given")
    return sorted(set(sizes))


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"not a shape: {text!r} (example: 128,3,224,224)")
    if not shape or any(d <= 0 for d in shape):
        raise UsageError(f"shape dimensions must be > 0, got {text!r}")
    return shape


def _stream() -> int:
    import torch

    return torch.cuda.current_stream().cuda_stream


def measure(
    sizes: Iterable[int] = tuple(parse_sizes("4K..1G")), directions: Iterable[str] = ("h2d", "d2h"), repeats: int = 10
) -> pd.DataFrame:
    """One row per (direction, memory, size): median GB/s (1e9 B/s) and ms of `repeats` copies,
    timed with CUDA events, plus the host time of the call (pageable copies block the host)."""
    C = require_cuda("transfer measurement")
    rows = []
    sizes = list(sizes)
    for d in directions:
        if d not in ("h2d", "d2h"):
            raise UsageError(f"direction must be h2d or d2h, got {d!r}")
        for pinned in (True, False):
            cols = C.measure_copies(sizes, d, pinned, repeats, _stream())
            df = pd.DataFrame(cols)
            for size, g in df.groupby("size_bytes"):
                med_ns = float(np.median(g["gpu_ns"]))
                rows.append(
                    {
                        "direction": d,
                        "memory": "pinned" if pinned else "pageable",
                        "size_bytes": int(size),
                        "gbps": size / med_ns if med_ns else float("nan"),
                        "ms": med_ns / 1e6,
                        "host_ms": float(np.median(g["host_ns"])) / 1e6,
                        "repeats": len(g),
                    }
                )
    return pd.DataFrame(rows)


def nominal_link_gbps() -> dict[str, Any]:
    """The PCIe link's nominal rate per direction (GB/s) from NVML, or why it is unknown.

    Nominal is the most the device and this system allow (NVML's max generation and width); an
    idle GPU trains its link down, so the current generation read between copies understates it.
    """
    per_lane = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
    try:
        import pynvml

        from perfcore.capture.sampler import nvml_handle

        pynvml.nvmlInit()
        h, _ = nvml_handle(pynvml, _current_device())
        gen = pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h)
        width = pynvml.nvmlDeviceGetCurrPcieLinkWidth(h)
        max_gen = pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h)
        max_width = pynvml.nvmlDeviceGetMaxPcieLinkWidth(h)
        pynvml.nvmlShutdown()
    except Exception as e:
        # The reason as a code, with NVML's own message (report.words.runs says it).
        return {"gbps": None, "reason": "nvml_unavailable", "error": f"{type(e).__name__}: {e}"}
    return {
        "gbps": per_lane.get(max_gen, float("nan")) * max_width,
        "generation": max_gen,
        "width": max_width,
        "current_generation": gen,
        "current_width": width,
    }


def summarize_curve(df: pd.DataFrame, nominal: float | None) -> dict[str, Any]:
    """Peak GB/s per direction and memory kind, and the share of the nominal link rate (pure)."""
    out: dict[str, Any] = {}
    for (d, mem), g in df.groupby(["direction", "memory"]):
        peak = float(g["gbps"].max())
        out[f"{d}_{mem}_peak_gbps"] = peak
        if nominal:
            out[f"{d}_{mem}_of_nominal"] = peak / nominal
    return out


def batch_cost(shape: tuple[int, ...], dtype: str = "float32", repeats: int = 20) -> dict[str, Any]:
    """ms to move one batch of `shape` host-to-device from pinned and from pageable memory."""
    require_cuda("batch transfer cost")
    import torch

    dt = getattr(torch, dtype, None)
    if not isinstance(dt, torch.dtype):
        raise UsageError(f"unknown dtype {dtype!r} (examples: float32, float16, uint8)")
    out: dict[str, Any] = {"shape": list(shape), "dtype": dtype}
    for pinned in (True, False):
        x = torch.empty(shape, dtype=dt)
        if pinned:
            x = x.pin_memory()
        x.cuda(non_blocking=pinned)
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
        for a, b in ev:
            a.record()
            x.cuda(non_blocking=pinned)
            b.record()
        torch.cuda.synchronize()
        ms = float(np.median([a.elapsed_time(b) for a, b in ev]))
        out["pinned_ms" if pinned else "pageable_ms"] = ms
    out["bytes"] = int(np.prod(shape)) * torch.empty((), dtype=dt).element_size()
    out["saving_ms"] = out["pageable_ms"] - out["pinned_ms"]
    out.update(overlap_check(shape, dt))
    return out


def overlap_check(shape: tuple[int, ...], dtype, kernel_ms: float = 20.0) -> dict[str, Any]:
    """Does a non_blocking H2D copy run while a kernel runs on another stream? Launch a spin kernel
    of `kernel_ms`, then the copy on a second stream; events on both streams say whether the copy
    finished inside the kernel's interval. Done for pinned and pageable source memory.

    Everything the copy needs (source, pinned or not, and its device destination) is allocated,
    and one copy made, before the kernel starts: an allocation while it runs could wait for the
    device (the caching allocator may free cached blocks, which synchronizes) and look like a copy
    that cannot overlap."""
    C = require_cuda("overlap check")
    import time

    import torch

    res: dict[str, Any] = {}
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    for pinned in (True, False):
        x = torch.empty(shape, dtype=dtype)
        if pinned:
            x = x.pin_memory()
        dst = torch.empty(shape, dtype=dtype, device="cuda")
        with torch.cuda.stream(side):
            dst.copy_(x, non_blocking=True)  # warm: first-use set-up happens here, not in the timed copy
        k0, k1, c0, c1 = (torch.cuda.Event(enable_timing=True) for _ in range(4))
        torch.cuda.synchronize()
        k0.record(main)
        C.launch_spin(int(kernel_ms * 1e6), main.cuda_stream)
        k1.record(main)
        t = time.perf_counter()
        with torch.cuda.stream(side):
            c0.record(side)
            dst.copy_(x, non_blocking=True)
            c1.record(side)
        host_ms = (time.perf_counter() - t) * 1e3
        torch.cuda.synchronize()
        start, end = k0.elapsed_time(c0), k0.elapsed_time(c1)
        kernel = k0.elapsed_time(k1)
        key = "pinned" if pinned else "pageable"
        res[f"overlap_{key}"] = bool(end <= kernel and start < kernel)
        res[f"host_blocked_ms_{key}"] = host_ms
    return res


def _current_device() -> int:
    import sys

    torch = sys.modules.get("torch")
    return int(torch.cuda.current_device()) if torch is not None and torch.cuda.is_initialized() else 0
