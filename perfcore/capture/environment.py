"""Environment check behind `perfcore env`: build info plus a non-destructive look at the machine.

Every check returns a Check(status ok/warn/fail/info, a reason code and its figures); the words
(value and fix) are made in perfcore/report/words/__init__.py. Nothing here changes the machine: no process is killed, no GPU is reset, no setting is written.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from perfcore._native import build_info, capabilities

__all__ = [
    "Check",
    "run_checks",
    "environment_report",
    "cupti_release",
    "driver_cuda_version",
    "driver_cupti_gap",
]

GiB = 1024**3


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail | info
    code: str  # what was found, said by report/words/__init__.py with its figures
    figures: dict[str, Any] = field(default_factory=dict)


def _fs_of(path: str) -> str:
    """The file system type of the mount that holds `path` (the longest mount point above it)."""
    import psutil

    p = os.path.realpath(path)
    try:
        mounts = psutil.disk_partitions(all=True)
    except OSError:  # no mount table to read
        return "unknown"
    above = [m for m in mounts if p == m.mountpoint or p.startswith(m.mountpoint.rstrip("/") + "/")]
    return max(above, key=lambda m: len(m.mountpoint)).fstype if above else "unknown"


def check_build() -> list[Check]:
    info = build_info()
    caps = capabilities()
    if info.get("mode") is None or caps["mode"] is None:
        reason = caps["reasons"].get("native") or info.get("reason", "")
        return [Check("build", "fail", "native_missing", {"reason": reason})]
    if caps["mode"] != "cuda":
        # setup.py's reason reads "<why>; for the CUDA mode <how>": the why is the value, the how the fix.
        why, _, how = (info.get("reason") or "").partition("; for the CUDA mode ")
        return [Check("build", "warn", "cpu_mode", {"why": why, "how": how})]
    figures = {
        "loaded": caps["cupti_version"],
        "compiled": caps["cupti_compiled_version"],
        "source": (info.get("cupti") or {}).get("source", "?"),
        "warnings": list(caps["warnings"]),
    }
    return [
        Check("build", "ok", "cuda_mode", {"toolkit": info.get("toolkit_version"), "arch": info.get("arch_list")}),
        Check("cupti", "ok" if not caps["warnings"] else "warn", "cupti", figures),
    ]


def driver_cuda_version() -> int | None:
    """The CUDA version the installed driver supports (12040 for 12.4), from libcuda's
    cuDriverGetVersion, which needs no device; None where there is no driver."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(v)) != 0 or v.value <= 0:
            return None
        return int(v.value)
    except (OSError, AttributeError):
        return None


def driver_cupti_gap(driver: int | None, cupti_release: str | None) -> tuple[str, str] | None:
    """(driver's CUDA, CUPTI's CUDA) as "12.4", "12.8" when the driver supports an older CUDA than the
    CUPTI perfcore loads (None when not, or not known). CUPTI is not covered by CUDA's minor-version
    compatibility: torch's kernels run on such a driver while CUPTI refuses to start
    (CUPTI_ERROR_NOT_INITIALIZED, or UNKNOWN)."""
    if not driver or not cupti_release:
        return None
    try:
        want = tuple(int(x) for x in cupti_release.split(".")[:2])
    except ValueError:
        return None
    have = (driver // 1000, driver % 1000 // 10)
    if have >= want:
        return None
    return f"{have[0]}.{have[1]}", ".".join(str(x) for x in want)


def cupti_release() -> str | None:
    return (build_info().get("cupti") or {}).get("release")


def check_gpu() -> list[Check]:
    caps = capabilities()
    checks = []
    if caps["device_count"] == 0:
        reason = caps["reasons"].get("cuda_events", "no device")
        checks.append(Check("gpu", "info", "no_gpu", {"reason": reason}))
    else:
        checks.append(Check("gpu", "ok", "gpus", {"count": caps["device_count"]}))
    gap = driver_cupti_gap(driver_cuda_version(), cupti_release())
    if gap:
        checks.append(Check("driver.cupti", "warn", "driver_older", {"driver_cuda": gap[0], "cupti_cuda": gap[1]}))
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        if caps["device_count"]:
            checks.append(Check("nvml", "warn", "nvml_missing"))
        return checks
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound and friends: no driver here
        if caps["device_count"]:
            checks.append(Check("nvml", "warn", "nvml_unavailable", {"error": str(e)}))
        return checks
    try:
        checks.append(Check("driver", "info", "value", {"value": str(pynvml.nvmlSystemGetDriverVersion())}))
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            used_frac = mem.used / mem.total if mem.total else 0.0
            figures = {"gpu": str(name), "used_bytes": int(mem.used), "total_bytes": int(mem.total)}
            checks.append(Check(f"gpu{i}.memory", "warn" if used_frac > 0.10 else "ok", "gpu_memory", figures))
            procs = []
            for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    procs += getattr(pynvml, fn)(h)
                except Exception:
                    pass
            others = [p for p in procs if p.pid != os.getpid()]
            if others:
                shown = [{"pid": int(p.pid), "used_bytes": int(p.usedGpuMemory or 0)} for p in others[:5]]
                figures = {"count": len(others), "processes": shown}
                checks.append(Check(f"gpu{i}.processes", "warn", "gpu_others", figures))
            else:
                checks.append(Check(f"gpu{i}.processes", "ok", "gpu_alone"))
    finally:
        pynvml.nvmlShutdown()
    return checks


def check_cpu() -> list[Check]:
    import psutil

    cores = os.cpu_count() or 1
    busy = psutil.cpu_percent(interval=0.3)
    checks = [Check("cpu.load", "warn" if busy > 50 else "ok", "cpu_load", {"busy_pct": busy, "cores": cores})]
    governors = sorted(
        {p.read_text().strip() for p in Path("/sys/devices/system/cpu").glob("cpu*/cpufreq/scaling_governor")}
    )
    if not governors:
        checks.append(Check("cpu.governor", "info", "governor_hidden"))
    else:
        status = "ok" if governors == ["performance"] else "warn"
        checks.append(Check("cpu.governor", status, "governor", {"governors": governors}))
    vm = psutil.virtual_memory()
    figures = {"available_bytes": int(vm.available), "total_bytes": int(vm.total)}
    checks.append(Check("ram.available", "warn" if vm.available < 2 * GiB else "ok", "ram", figures))
    return checks


def check_limits() -> list[Check]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    figures = {"soft": soft, "hard": hard, "suggested": min(hard, 65536)}
    checks = [Check("ulimit.nofile", "warn" if soft < 4096 else "ok", "nofile", figures)]
    for path, need in (("/tmp", 1 * GiB), ("/dev/shm", 1 * GiB)):
        if not os.path.isdir(path):
            continue
        free = shutil.disk_usage(path).free
        figures = {"path": path, "free_bytes": int(free), "fs": _fs_of(path)}
        checks.append(Check(f"{path}.free", "warn" if free < need else "ok", "free_space", figures))
    return checks


def check_versions() -> list[Check]:
    checks = [
        Check("python", "info", "value", {"value": sys.version.split()[0]}),
        Check("platform", "info", "value", {"value": platform.platform()}),
    ]
    try:
        import torch
    except ImportError:
        return checks + [Check("torch", "fail", "torch_missing")]
    checks.append(Check("torch", "info", "torch", {"version": torch.__version__, "cuda": torch.version.cuda}))
    cudnn = torch.backends.cudnn
    checks.append(Check("cudnn", "info", "cudnn", {"version": cudnn.version() if cudnn.is_available() else None}))
    bench = bool(cudnn.benchmark)
    # cuDNN's kernel choice only matters where convolutions run on a GPU: no advice for a machine without one.
    gpu = bool(torch.cuda.is_available())
    checks.append(Check("cudnn.benchmark", "info", "cudnn_benchmark", {"on": bench, "gpu": gpu}))
    return checks


CHECKS: list[Callable[[], list[Check]]] = [check_build, check_gpu, check_cpu, check_limits, check_versions]


def run_checks() -> list[Check]:
    out: list[Check] = []
    for fn in CHECKS:
        try:
            out += fn()
        except Exception as e:  # one broken probe must not hide the others
            out.append(
                Check(fn.__name__.replace("check_", ""), "warn", "check_failed", {"error": f"{type(e).__name__}: {e}"})
            )
    return out


def environment_report() -> dict[str, Any]:
    """The facts of `perfcore env --json` (schema perfcore.env/1); report/words/__init__.py adds each check's
    words (value, fix) beside its code and figures."""
    checks = run_checks()
    return {
        "schema": "perfcore.env/1",
        "build": build_info(),
        "capabilities": capabilities(),
        "checks": [asdict(c) for c in checks],
        "summary": {s: sum(1 for c in checks if c.status == s) for s in ("ok", "warn", "fail", "info")},
    }
