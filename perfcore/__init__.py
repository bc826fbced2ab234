"""perfcore: where every millisecond of a PyTorch training step goes (load, transfer, compute, comm, host).

Importing perfcore is cheap and never needs a GPU; the native core and torch load on first use.
"""
from __future__ import annotations

from ._native import build_info, capabilities
from .errors import (
    CudaError,
    CuptiError,
    CuptiUnavailable,
    DeviceUnavailable,
    NativeUnavailable,
    PerfcoreError,
    UsageError,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "build_info",
    "capabilities",
    "PerfcoreError",
    "UsageError",
    "DeviceUnavailable",
    "CudaError",
    "CuptiError",
    "CuptiUnavailable",
    "NativeUnavailable",
]
