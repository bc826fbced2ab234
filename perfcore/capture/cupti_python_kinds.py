"""cupti-python's names and releases: its record classes and their numpy dtypes under both naming
schemes, which release fits which torch, and whether one can trace beside it."""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "PACKAGE",
    "Kinds",
    "check_versions",
    "install_spec",
    "install_advice",
    "decoded_nothing",
    "disable_kernel_safe",
    "loaded_cupti_version",
    "torch_cuda",
]

PACKAGE = "cupti-python"

# The activity kinds the backend reads, and the table each lands in (CUpti_ActivityKind names).
KIND_TABLE = {
    "CONCURRENT_KERNEL": "kernels",
    "KERNEL": "kernels",
    "MEMCPY": "memcpy",
    "MEMSET": "memset",
    "SYNCHRONIZATION": "sync",
    "EXTERNAL_CORRELATION": "external_correlation",
    "OVERHEAD": "overhead",
    "RUNTIME": "api",
    "DRIVER": "api",
}
# Record classes of those kinds, any struct version: each release names the newest of its CUPTI
# (12.8: ActivityKernel9, ActivityMemcpy6; 13.x: ActivityKernel10, ...). Not ActivityMemcpyKind and
# the like, which are enums.
_RECORD_CLASS = re.compile(
    r"^Activity(Kernel|Memcpy|Memset|Synchronization|Overhead)\d*$|"
    r"^Activity(ExternalCorrelation|API)$"
)

# cupti-python's releases on PyPI (pip index versions cupti-python): 12.6.0, 12.8.0, 13.0.0,
# 13.0.1, 13.2.0, 13.3.0, 13.3.1, 13.4.0. Release X.Y requires nvidia-cuda-cupti >= X.Y (13.x:
# ~=X.Y), so for a torch on CUPTI X.Z the one to install is the newest X.Y with Y <= Z; 12.6.0 pins
# nvidia-cuda-cupti-cu12==12.6.37, which no torch cu126 wheel pins (2.7.1 wants 12.6.80).
_RELEASES = {12: (8,), 13: (0, 2, 3, 4)}


def _snake(name: str) -> str:
    """ActivityKernel9 -> activity_kernel9, ActivityAPI -> activity_api."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


class Kinds:
    """cupti-python's record classes -> their numpy dtypes, and ActivityKind value -> table.

    13.x names a dtype after its class (activity_kernel10_dtype); 12.x prefixes it with c_upti_
    (c_upti_activity_kernel9_dtype)."""

    def __init__(self, cupti: Any):
        K = cupti.ActivityKind
        self.table = {int(getattr(K, n)): t for n, t in KIND_TABLE.items() if hasattr(K, n)}
        self.driver = int(K.DRIVER)
        self.dtype: dict[Any, Any] = {}
        for cls in dir(cupti):
            if not _RECORD_CLASS.match(cls):
                continue
            snake = _snake(cls)
            for dname in (f"{snake}_dtype", f"c_upti_{snake}_dtype"):
                if hasattr(cupti, dname):
                    self.dtype[getattr(cupti, cls)] = getattr(cupti, dname)
                    break

    def missing(self) -> list[str]:
        """The record kinds perfcore needs that this cupti-python has no class+dtype for."""
        have = {c.__name__ for c in self.dtype}
        want = {"kernels": "ActivityKernel", "memcpy": "ActivityMemcpy", "api": "ActivityAPI"}
        return [t for t, prefix in want.items() if not any(re.fullmatch(prefix + r"\d*", h) for h in have)]


def _major_minor(v: str) -> tuple[int, int]:
    parts = (v.split("+")[0].split(".") + ["0"])[:2]
    return int(parts[0]), int(parts[1])


def install_spec(cuda_version: str | None) -> str | None:
    """The cupti-python requirement that installs beside a torch built for this CUDA without
    replacing torch's CUPTI, or None where no release does."""
    if not cuda_version:
        return None
    major, minor = _major_minor(cuda_version)
    fits = [m for m in _RELEASES.get(major, ()) if m <= minor]
    return f"{PACKAGE}=={major}.{fits[-1]}.*" if fits else None


def install_advice(cuda_version: str | None) -> str:
    """What to type for the cupti-python backend beside this torch, or why there is nothing to type."""
    spec = install_spec(cuda_version)
    if spec:
        return f'pip install "{spec}" (the release that fits torch\'s CUPTI {cuda_version})'
    if not cuda_version:
        return "it needs a CUDA build of torch"
    return (
        f"no {PACKAGE} release installs beside torch's CUPTI {cuda_version} without replacing it "
        f"(12.6.0 pins nvidia-cuda-cupti-cu12==12.6.37; there is none for 12.5 and older): the native "
        "tracer is the CUPTI backend there"
    )


def check_versions(cupti_python_version: str, cuda_version: str | None, libcupti_version: str | None) -> str | None:
    """Why this cupti-python cannot trace beside this torch, or None if it can.

    cupti-python X.Y binds libcupti of CUDA X (the nvidia-cuda-cupti wheel torch's CUDA X builds
    ship, which is the library loaded) and may call functions added up to X.Y, so the library
    must be X.Y or newer.
    """
    if not cuda_version:
        return "torch is a CPU build: there is no CUPTI to trace with"
    have = _major_minor(cupti_python_version)
    if have[0] != _major_minor(cuda_version)[0]:
        return (
            f"{PACKAGE} {cupti_python_version} is for CUDA {have[0]}, but torch uses CUDA {cuda_version}; "
            f"{install_advice(cuda_version)}"
        )
    if libcupti_version and _major_minor(libcupti_version) < have:
        return (
            f"{PACKAGE} {cupti_python_version} is newer than the CUPTI torch loads ({libcupti_version}); "
            f"{install_advice(libcupti_version)} (never upgrade torch's nvidia-cuda-cupti)"
        )
    return None


# Disabling CONCURRENT_KERNEL may deadlock on CUDA 13.0 GA's CUPTI (API 130000; fixed in 13.0
# Update 1, API 130001): the native tracer keeps the kind on there (tracer.h, disableKernelSafe)
# and so does this backend. With no version to read, a 13.0 torch counts as unsafe.
KERNEL_DISABLE_UNSAFE = (130000, 130001)  # [from, fixed at)


def disable_kernel_safe(loaded_version: int | None, torch_cuda: str | None) -> bool:
    """Whether stopping may disable CONCURRENT_KERNEL with this CUPTI."""
    if loaded_version:
        return not KERNEL_DISABLE_UNSAFE[0] <= loaded_version < KERNEL_DISABLE_UNSAFE[1]
    return not (torch_cuda or "").startswith("13.0")


def loaded_cupti_version() -> int | None:
    try:
        from perfcore._native import native

        return int(native().cupti_loaded_version()) or None
    except Exception:  # no extension or no CUPTI in it: decided by torch's CUDA version
        return None


def decoded_nothing(stats: dict[str, Any], cuda_version: str | None) -> str:
    """Adds `decoded_records` to a tracer's stats; when records came but none was decoded (every
    one of a class this backend does not read), also `warning`, which it returns ('' otherwise):
    "zero kernels" must never pass for a result."""
    stats["decoded_records"] = decoded = stats["records"] - stats["other_records"] - stats["invalid_timestamps"]
    if not stats["records"] or decoded:
        return ""
    stats["warning"] = (
        f"{PACKAGE} delivered {stats['records']} records and perfcore decoded none of them "
        f"(record classes it does not know); {install_advice(cuda_version)}"
    )
    return stats["warning"]


def torch_cuda() -> str | None:
    import torch

    return torch.version.cuda
