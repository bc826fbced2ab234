"""The words of `perfcore env`: each check's value and fix, made from its reason code and figures."""

from __future__ import annotations

from typing import Any, Callable, Mapping

__all__ = ["check_words", "driver_older_words", "sampling_words", "with_words"]

_GiB = 1024**3


def _gib(n: float, digits: int = 1) -> str:
    return f"{n / _GiB:.{digits}f}"


def driver_older_words(driver_cuda: str, cupti_cuda: str) -> str:
    return (
        f"the NVIDIA driver supports CUDA {driver_cuda}, older than the CUPTI perfcore uses (CUDA {cupti_cuda}): "
        f"kernel tracing needs a newer driver, or a torch built for CUDA {driver_cuda} (perfcore then rebuilt); "
        "CUDA events time the GPU meanwhile"
    )


def sampling_words(nvml_error: str) -> str:
    """What the sampler could not do, from NVML's error ("" when it samples the GPU)."""
    return f"no GPU sampling ({nvml_error}); CPU and RAM only" if nvml_error else ""


def _cpu_mode(f: Mapping[str, Any]) -> tuple[str, str]:
    fix = "GPU timing, CUPTI and transfer tools are left out of this build"
    return f"CPU mode: {f['why']}", fix + (f"; for the CUDA mode {f['how']}" if f.get("how") else "")


def _free_space(f: Mapping[str, Any], warn: bool) -> tuple[str, str]:
    value = f"{_gib(f['free_bytes'])} GiB free ({f['fs']})"
    if not warn:
        return value, ""
    shm = f["path"] == "/dev/shm"
    why = "DataLoader workers hand batches over in shared memory" if shm else "scratch files and compile caches"
    todo = "run docker with --shm-size=8g" if shm else "free space or set TMPDIR"
    return value, f"only {_gib(f['free_bytes'], 2)} GiB free ({why}); {todo}"


def _gpu_others(f: Mapping[str, Any]) -> tuple[str, str]:
    desc = ", ".join(f"pid {p['pid']} ({_gib(p['used_bytes'])} GiB)" for p in f["processes"])
    fix = "other work on this GPU shares its SMs and memory bandwidth; stop it for clean numbers"
    return f"{f['count']} other process(es): {desc}", fix


# code -> (figures, warn) -> (value, fix); warn is the check's status being warn or fail.
_WORDS: dict[str, Callable[[Mapping[str, Any], bool], tuple[str, str]]] = {
    "native_missing": lambda f, w: ("perfcore._C not loadable", f["reason"]),
    "cuda_mode": lambda f, w: (f"CUDA mode, CUDA {f['toolkit']}, arch {f['arch']}", ""),
    "cupti": lambda f, w: (
        f"API {f['loaded']} loaded, {f['compiled']} compiled ({f['source']})",
        "; ".join(f["warnings"]),
    ),
    "cpu_mode": lambda f, w: _cpu_mode(f),
    "no_gpu": lambda f, w: (
        f"no CUDA GPU usable: {f['reason']}",
        "GPU checks skipped; perfcore measures host phases only here",
    ),
    "gpus": lambda f, w: (f"{f['count']} CUDA device(s) visible", ""),
    "driver_older": lambda f, w: (driver_older_words(f["driver_cuda"], f["cupti_cuda"]), ""),
    "nvml_missing": lambda f, w: (
        "nvidia-ml-py not installed",
        "pip install nvidia-ml-py (GPU utilisation sampling and process checks need it)",
    ),
    "nvml_unavailable": lambda f, w: (f"NVML unavailable: {f['error']}", "GPU sampling will fall back to none"),
    "value": lambda f, w: (str(f["value"]), ""),
    "gpu_memory": lambda f, w: (
        f"{f['gpu']}: {_gib(f['used_bytes'])} of {_gib(f['total_bytes'])} GiB in use",
        "another job holds GPU memory: results will be skewed; free it first" if w else "",
    ),
    "gpu_others": lambda f, w: _gpu_others(f),
    "gpu_alone": lambda f, w: ("no other process on this GPU", ""),
    "cpu_load": lambda f, w: (
        f"{f['busy_pct']:.0f}% busy over 0.3 s, {f['cores']} logical cores",
        "other processes compete with DataLoader workers; stop them or expect noisy load times" if w else "",
    ),
    "governor_hidden": lambda f, w: ("not exposed (VM or container)", ""),
    "governor": lambda f, w: (
        ",".join(f["governors"]),
        "frequency scaling adds noise: sudo cpupower frequency-set -g performance" if w else "",
    ),
    "ram": lambda f, w: (
        f"{_gib(f['available_bytes'])} of {_gib(f['total_bytes'])} GiB",
        "little free RAM: workers and pinned buffers may swap or be killed" if w else "",
    ),
    "nofile": lambda f, w: (
        f"soft {f['soft']}, hard {f['hard']}",
        f"DataLoader workers pass tensors through file descriptors: ulimit -n {f['suggested']}" if w else "",
    ),
    "free_space": _free_space,
    "torch_missing": lambda f, w: ("not installed", "pip install torch"),
    "torch": lambda f, w: (f"{f['version']} (CUDA {f['cuda'] or 'none'})", ""),
    "cudnn": lambda f, w: (str(f["version"]) if f["version"] is not None else "not available", ""),
    "cudnn_benchmark": lambda f, w: (
        str(f["on"]),
        ""
        if f["on"] or not f["gpu"]
        else "for fixed input shapes, torch.backends.cudnn.benchmark = True picks faster conv kernels",
    ),
    "check_failed": lambda f, w: (f"check failed: {f['error']}", ""),
}


def check_words(check: Mapping[str, Any]) -> tuple[str, str]:
    """(value, fix) of one check (a dict of name, status, code, figures); a code this version does not
    know (a newer document) shows its figures as they are."""
    figures = check.get("figures") or {}
    say = _WORDS.get(str(check.get("code")))
    if say is None:
        return ", ".join(f"{k} {v}" for k, v in figures.items()), ""
    try:
        return say(figures, check.get("status") in ("warn", "fail"))
    except (KeyError, TypeError, ValueError):  # figures missing or of another shape: said as they are
        return ", ".join(f"{k} {v}" for k, v in figures.items()), ""


def with_words(report: dict[str, Any]) -> dict[str, Any]:
    """The env document with each check's rendered value and fix beside its code and figures (run.json-style
    readers outside perfcore read "value" and "fix" as before)."""
    checks = []
    for c in report["checks"]:
        value, fix = check_words(c)
        checks.append({**c, "value": value, "fix": fix})
    return {**report, "checks": checks}
