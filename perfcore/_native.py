"""Loads perfcore._C and says what it can do: capabilities(), build_info(), require_*()."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import warnings
from pathlib import Path
from typing import Any, Mapping

from perfcore.errors import CuptiUnavailable, DeviceUnavailable, NativeUnavailable

__all__ = [
    "native",
    "build_info",
    "capabilities",
    "require_cuda",
    "require_cupti",
    "TracerStats",
    "StreamStats",
    "ClockSync",
]

_BUILD_INFO = Path(__file__).with_name("_build_info.json")
GPU_FEATURES = ("cuda_events", "cupti", "transfer", "calibration")  # what a GPU-less build or machine lacks
# Right for an install from pip as well as for a checkout.
REBUILD = (
    "pip install --no-build-isolation --force-reinstall --no-deps <where perfcore came from>, "
    "or ./scripts/setup.sh in a checkout"
)


@functools.lru_cache(maxsize=None)
def build_info() -> dict[str, Any]:
    """What setup.py decided (mode, versions, CUPTI source, flags). Readable without loading _C."""
    try:
        return json.loads(_BUILD_INFO.read_text())
    except FileNotFoundError:
        return {"mode": None, "reason": "perfcore was not built (no _build_info.json)"}


@functools.lru_cache(maxsize=None)
def _load():
    info = build_info()
    if info.get("mode") == "cuda":
        # torch loads its own libcudart/libcupti by soname; importing it first makes _C bind to
        # those same copies instead of pulling a second runtime from the toolkit.
        import torch  # noqa: F401
    try:
        from perfcore import _C
    except ImportError as e:
        raise NativeUnavailable(
            f"perfcore's native core did not load ({e}); rebuild it against this torch: {REBUILD}"
        ) from e
    warn_unwanted_cpu_mode(info)
    return _C


def unwanted_cpu_mode(info: dict[str, Any]) -> str:
    """The warning for a CPU-mode build that nobody asked for (torch was a CUDA build and
    PERFCORE_CPU_ONLY unset), else ''. pip shows the build's reason only with -v."""
    if info.get("mode") != "cpu" or not info.get("cuda_wanted"):
        return ""
    return (
        f"perfcore was built in CPU mode although torch {info.get('torch_version')} is a CUDA build, so GPU "
        f"tracing is off: {info.get('reason') or 'no reason recorded'}"
    )


def warn_unwanted_cpu_mode(info: dict[str, Any]) -> None:
    msg = unwanted_cpu_mode(info)
    if msg:  # once per process: _load is cached
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def native():
    """The perfcore._C module (raises NativeUnavailable with the fix if it cannot load)."""
    return _load()


@functools.lru_cache(maxsize=None)
def _device_probe() -> tuple[int, str]:
    C = native()
    if not C.CUDA_COMPILED:
        return 0, build_info().get("reason") or "perfcore was built in CPU mode"
    count, reason = C.device_count()
    return count, reason if count else _why_no_device(reason)


def _why_no_device(runtime_reason: str) -> str:
    """The runtime's reason for seeing no device, in the machine's terms. The CUDA runtime answers
    cudaErrorInsufficientDriver ("CUDA driver version is insufficient") where there is no driver at
    all, which reads as a driver to update: the driver's library, libcuda, is asked whether it is there."""
    if not runtime_reason.startswith("cudaErrorInsufficientDriver"):
        return runtime_reason
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no NVIDIA driver on this machine: libcuda.so.1 not found"
    return runtime_reason


def capabilities() -> dict[str, Any]:
    """What this build and this machine can do, with a human reason for each missing feature.

    Keys: mode, cuda_compiled, cupti_compiled, cupti_version, cupti_compiled_version,
    device_count, features {name: bool}, reasons {name: why not}, warnings [str].
    """
    try:
        C = native()
    except NativeUnavailable as e:
        return {
            "mode": None,
            "cuda_compiled": False,
            "cupti_compiled": False,
            "cupti_version": None,
            "cupti_compiled_version": None,
            "device_count": 0,
            "features": dict.fromkeys(("spans", *GPU_FEATURES), False),
            "reasons": {"native": str(e)},
            "warnings": [],
        }
    count, why_no_device = _device_probe()
    warnings: list[str] = []
    cupti_loaded = cupti_compiled = None
    if C.CUDA_COMPILED:
        cupti_compiled = int(C.cupti_compiled_version())
        cupti_loaded = int(C.cupti_loaded_version()) or None
        if cupti_loaded and cupti_loaded != cupti_compiled:
            warnings.append(
                f"perfcore was compiled against CUPTI API {cupti_compiled} but CUPTI {cupti_loaded} is loaded; "
                f"records may be misread: rebuild perfcore against this torch: {REBUILD}"
            )
    gpu_reason = None
    if not C.CUDA_COMPILED:
        gpu_reason = f"built in CPU mode: {why_no_device}"  # setup.py's reason
    elif count == 0:
        gpu_reason = f"no CUDA device visible ({why_no_device or 'device count is 0'})"
    features = {"spans": True, **dict.fromkeys(GPU_FEATURES, gpu_reason is None)}
    reasons = dict.fromkeys(GPU_FEATURES, gpu_reason) if gpu_reason else {}
    if os.environ.get("PERFCORE_DISABLE_CUPTI"):
        features["cupti"] = False
        reasons["cupti"] = "disabled by PERFCORE_DISABLE_CUPTI"
    return {
        "mode": "cuda" if C.CUDA_COMPILED else "cpu",
        "cuda_compiled": bool(C.CUDA_COMPILED),
        "cupti_compiled": bool(C.CUPTI_COMPILED),
        "cupti_version": cupti_loaded,
        "cupti_compiled_version": cupti_compiled,
        "device_count": count,
        "features": features,
        "reasons": reasons,
        "warnings": warnings,
    }


def require_cuda(what: str):
    """The native module if `what` can run on a GPU here, else DeviceUnavailable saying why."""
    return _require("cuda_events", f"{what} needs a CUDA GPU", DeviceUnavailable)


def require_cupti(what: str):
    return _require("cupti", f"{what} needs CUPTI", CuptiUnavailable)


def _require(feature: str, needs: str, error: type[Exception]):
    caps = capabilities()
    if not caps["features"][feature]:
        raise error(f"{needs}: {caps['reasons'].get(feature, 'unavailable')}")
    return native()


class _NativeRecord:
    """A dict the native module returns, read once into its frozen record: each field this class names,
    as its default's type; one the dict lacks (an older build, the cupti-python tracer's own counts)
    keeps its default, and a key the class does not name is left behind."""

    @classmethod
    def of(cls, raw: Mapping[str, Any] | None):
        raw = raw or {}
        return cls(**{f.name: type(f.default)(raw[f.name]) for f in dataclasses.fields(cls) if f.name in raw})


@dataclasses.dataclass(frozen=True)
class TracerStats(_NativeRecord):
    """A CUPTI tracer's counts (cupti_stats(), or the cupti-python tracer's stats): records decoded and
    every kind of loss, buffers, flushes, the clock, graph captures, and the guards this CUPTI needed."""

    records: int = 0
    dropped_records: int = 0  # CUPTI had no buffer for them
    discarded_records: int = 0
    overflow_records: int = 0  # past the decode cap
    invalid_timestamps: int = 0
    zero_timestamps: int = 0
    buffers_undecodable: int = 0
    buffers_incomplete: int = 0
    bytes_unwalked: int = 0
    device_buffer_bytes: int = 0
    api_calls_filtered: int = 0
    session: int = 0  # which CUPTI session of this process
    buffers_completed: int = 0
    buffers_denied: int = 0
    flushes: int = 0
    flush_ns: float = 0.0
    forced_flush_ns: float = 0.0
    clock_drift_ns: int = 0
    stale_dropped: int = 0
    captures_seen: int = 0
    flushes_held: int = 0  # flushes put off while a graph capture was underway
    graph_ids_untrusted: bool = False  # a guard this CUPTI version needed (run.json capture.guards)
    concurrent_kernel_left_on: bool = False  # another
    finalized: bool = False  # CUPTI finalized at a hand-over


@dataclasses.dataclass(frozen=True)
class StreamStats(_NativeRecord):
    """How an EventTimer's phases found their stream (stream_stats()): on the current stream, unseen
    (the legacy default instead), moved inside the phase, under a graph capture, or with events the
    runtime refused (the last refusal's error)."""

    followed: int = 0
    unseen: int = 0
    switched_inside: int = 0
    capturing: int = 0
    unreadable: int = 0
    last_unreadable_error: str = ""  # the runtime's name for the last refusal


@dataclasses.dataclass(frozen=True)
class ClockSync(_NativeRecord):
    """An EventTimer's anchors to the host clock (clock_sync()): how many, the largest drift, the anchor's
    uncertainty."""

    syncs: int = 0
    max_abs_drift_ns: int = 0
    uncertainty_ns: int = 0
