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


def load_ipython_extension(ipython):
    """`%load_ext perfcore` registers the %%perfcore cell magic."""
    from .magic import load_ipython_extension as _load

    _load(ipython)


def __getattr__(name: str):
    # StepTimer pulls in numpy and pandas: load it on first use so `import perfcore` (and the
    # CLI's --help) stay light.
    if name in ("StepTimer", "RunResult"):
        from . import timing

        return getattr(timing, name)
    raise AttributeError(f"module 'perfcore' has no attribute {name!r}")

__all__ = [
    "__version__",
    "StepTimer",
    "RunResult",
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
