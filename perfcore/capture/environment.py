"""Environment check behind `perfcore env`: build info plus a non-destructive look at the machine.

Every check returns a Check(status ok/warn/fail/info, value, fix). Nothing here changes the
machine: no process is killed, no GPU is reset, no setting is written.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from perfcore._native import build_info, capabilities

__all__ = [
    "Check",
    "run_checks",
    "environment_report",
    "cupti_release",
    "driver_cuda_version",
    "driver_older_than_cupti",
]

GiB = 1024**3


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail | info
    value: str
    fix: str = ""


def _mounts() -> dict[str, str]:
    """mount point -> filesystem type, from /proc/mounts (empty where there is none)."""
    out: dict[str, str] = {}
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                out[parts[1]] = parts[2]
    except OSError:
        pass
    return out


def _fs_of(path: str, mounts: dict[str, str]) -> str:
    p = os.path.realpath(path)
    best = ""
    for mp in mounts:
        if (p == mp or p.startswith(mp.rstrip("/") + "/")) and len(mp) > len(best):
            best = mp
    return mounts.get(best, "unknown")


def check_build() -> list[Check]:
    info = build_info()
    caps = capabilities()
    checks = []
    if info.get("mode") is None or caps["mode"] is None:
        reason = caps["reasons"].get("native") or info.get("reason", "")
        return [Check("build", "fail", "perfcore._C not loadable", reason)]
    mode = caps["mode"]
    if mode == "cuda":
        c = info.get("cupti") or {}
        checks.append(
            Check("build", "ok", f"CUDA mode, CUDA {info.get('toolkit_version')}, arch {info.get('arch_list')}")
        )
        checks.append(
            Check(
                "cupti",
                "ok" if not caps["warnings"] else "warn",
                f"API {caps['cupti_version']} loaded, {caps['cupti_compiled_version']} compiled "
                f"({c.get('source', '?')})",
                "; ".join(caps["warnings"]),
            )
        )
    else:
        # setup.py's reason reads "<why>; for the CUDA mode <how>": the why is the value, the how the fix.
        why, _, how = (info.get("reason") or "").partition("; for the CUDA mode ")
        checks.append(
            Check(
                "build",
                "warn",
                f"CPU mode: {why}",
                "GPU timing, CUPTI and transfer tools are left out of this build"
                + (f"; for the CUDA mode {how}" if how else ""),
            )
        )
    return checks


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


def driver_older_than_cupti(driver: int | None, cupti_release: str | None) -> str:
    """One line when the driver supports an older CUDA than the CUPTI perfcore loads ("" when not,
    or not known). CUPTI is not covered by CUDA's minor-version compatibility: torch's kernels run
    on such a driver while CUPTI refuses to start (CUPTI_ERROR_NOT_INITIALIZED, or UNKNOWN)."""
    if not driver or not cupti_release:
        return ""
    try:
        want = tuple(int(x) for x in cupti_release.split(".")[:2])
    except ValueError:
        return ""
    have = (driver // 1000, driver % 1000 // 10)
    if have >= want:
        return ""
    return (
        f"the NVIDIA driver supports CUDA {have[0]}.{have[1]}, older than the CUPTI perfcore uses (CUDA "
        f"{want[0]}.{want[1]}): kernel tracing needs a newer driver, or a torch built for CUDA {have[0]}.{have[1]} "
        "(perfcore then rebuilt); CUDA events time the GPU meanwhile"
    )


def cupti_release() -> str | None:
    return (build_info().get("cupti") or {}).get("release")


def check_gpu() -> list[Check]:
    caps = capabilities()
    checks = []
    if caps["device_count"] == 0:
        reason = caps["reasons"].get("cuda_events", "no device")
        checks.append(
            Check(
                "gpu",
                "info",
                f"no CUDA GPU usable: {reason}",
                "GPU checks skipped; perfcore measures host phases only here",
            )
        )
    else:
        checks.append(Check("gpu", "ok", f"{caps['device_count']} CUDA device(s) visible"))
    old = driver_older_than_cupti(driver_cuda_version(), cupti_release())
    if old:
        checks.append(Check("driver.cupti", "warn", old))
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        if caps["device_count"]:
            checks.append(
                Check(
                    "nvml",
                    "warn",
                    "nvidia-ml-py not installed",
                    "pip install nvidia-ml-py (GPU utilisation sampling and process checks need it)",
                )
            )
        return checks
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound and friends: no driver here
        if caps["device_count"]:
            checks.append(Check("nvml", "warn", f"NVML unavailable: {e}", "GPU sampling will fall back to none"))
        return checks
    try:
        checks.append(Check("driver", "info", str(pynvml.nvmlSystemGetDriverVersion())))
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            used_frac = mem.used / mem.total if mem.total else 0.0
            checks.append(
                Check(
                    f"gpu{i}.memory",
                    "warn" if used_frac > 0.10 else "ok",
                    f"{name}: {mem.used / GiB:.1f} of {mem.total / GiB:.1f} GiB in use",
                    "another job holds GPU memory: results will be skewed; free it first" if used_frac > 0.10 else "",
                )
            )
            procs = []
            for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    procs += getattr(pynvml, fn)(h)
                except Exception:
                    pass
            others = [p for p in procs if p.pid != os.getpid()]
            if others:
                desc = ", ".join(f"pid {p.pid} ({(p.usedGpuMemory or 0) / GiB:.1f} GiB)" for p in others[:5])
                checks.append(
                    Check(
                        f"gpu{i}.processes",
                        "warn",
                        f"{len(others)} other process(es): {desc}",
                        "other work on this GPU shares its SMs and memory bandwidth; stop it for clean numbers",
                    )
                )
            else:
                checks.append(Check(f"gpu{i}.processes", "ok", "no other process on this GPU"))
    finally:
        pynvml.nvmlShutdown()
    return checks


def check_cpu() -> list[Check]:
    import psutil

    cores = os.cpu_count() or 1
    busy = psutil.cpu_percent(interval=0.3)
    checks = [
        Check(
            "cpu.load",
            "warn" if busy > 50 else "ok",
            f"{busy:.0f}% busy over 0.3 s, {cores} logical cores",
            "other processes compete with DataLoader workers; stop them or expect noisy load times"
            if busy > 50
            else "",
        )
    ]
    governors = sorted(
        {p.read_text().strip() for p in Path("/sys/devices/system/cpu").glob("cpu*/cpufreq/scaling_governor")}
    )
    if not governors:
        checks.append(Check("cpu.governor", "info", "not exposed (VM or container)"))
    elif governors != ["performance"]:
        checks.append(
            Check(
                "cpu.governor",
                "warn",
                ",".join(governors),
                "frequency scaling adds noise: sudo cpupower frequency-set -g performance",
            )
        )
    else:
        checks.append(Check("cpu.governor", "ok", "performance"))
    vm = psutil.virtual_memory()
    checks.append(
        Check(
            "ram.available",
            "warn" if vm.available < 2 * GiB else "ok",
            f"{vm.available / GiB:.1f} of {vm.total / GiB:.1f} GiB",
            "little free RAM: workers and pinned buffers may swap or be killed" if vm.available < 2 * GiB else "",
        )
    )
    return checks


def check_limits() -> list[Check]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    checks = [
        Check(
            "ulimit.nofile",
            "warn" if soft < 4096 else "ok",
            f"soft {soft}, hard {hard}",
            f"DataLoader workers pass tensors through file descriptors: ulimit -n {min(hard, 65536)}"
            if soft < 4096
            else "",
        )
    ]
    mounts = _mounts()
    for path, need, why in (
        ("/tmp", 1 * GiB, "scratch files and compile caches"),
        ("/dev/shm", 1 * GiB, "DataLoader workers hand batches over in shared memory"),
    ):
        if not os.path.isdir(path):
            continue
        free = shutil.disk_usage(path).free
        fs = _fs_of(path, mounts)
        fix = ""
        if free < need:
            fix = f"only {free / GiB:.2f} GiB free ({why}); " + (
                "run docker with --shm-size=8g" if path == "/dev/shm" else "free space or set TMPDIR"
            )
        checks.append(Check(f"{path}.free", "warn" if fix else "ok", f"{free / GiB:.1f} GiB free ({fs})", fix))
    return checks


def check_versions() -> list[Check]:
    checks = [Check("python", "info", sys.version.split()[0]), Check("platform", "info", platform.platform())]
    try:
        import torch
    except ImportError:
        return checks + [Check("torch", "fail", "not installed", "pip install torch")]
    checks.append(Check("torch", "info", f"{torch.__version__} (CUDA {torch.version.cuda or 'none'})"))
    cudnn = torch.backends.cudnn
    checks.append(Check("cudnn", "info", str(cudnn.version()) if cudnn.is_available() else "not available"))
    bench = bool(cudnn.benchmark)
    # cuDNN's kernel choice only matters where convolutions run on a GPU: no advice for a machine without one.
    gpu = bool(torch.cuda.is_available())
    checks.append(
        Check(
            "cudnn.benchmark",
            "info",
            str(bench),
            ""
            if bench or not gpu
            else "for fixed input shapes, torch.backends.cudnn.benchmark = True picks faster conv kernels",
        )
    )
    return checks


CHECKS: list[Callable[[], list[Check]]] = [check_build, check_gpu, check_cpu, check_limits, check_versions]


def run_checks() -> list[Check]:
    out: list[Check] = []
    for fn in CHECKS:
        try:
            out += fn()
        except Exception as e:  # one broken probe must not hide the others
            out.append(Check(fn.__name__.replace("check_", ""), "warn", f"check failed: {type(e).__name__}: {e}"))
    return out


def environment_report() -> dict[str, Any]:
    """The JSON document of `perfcore env --json` (schema perfcore.env/1)."""
    checks = run_checks()
    return {
        "schema": "perfcore.env/1",
        "build": build_info(),
        "capabilities": capabilities(),
        "checks": [asdict(c) for c in checks],
        "summary": {s: sum(1 for c in checks if c.status == s) for s in ("ok", "warn", "fail", "info")},
    }
