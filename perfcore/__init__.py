"""perfcore: where every millisecond of a PyTorch training step goes (load, transfer, compute, comm, host).

Importing perfcore is cheap and never needs a GPU; the native core and torch load on first use.
"""
from __future__ import annotations

from perfcore._native import build_info, capabilities
from perfcore.errors import (
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
    from perfcore.run.magic import load_ipython_extension as _load

    _load(ipython)


# Names that pull in numpy, pandas or torch load on first use, so `import perfcore` (and the CLI's
# --help) stay light: name -> (module, attribute or None for the module itself).
_LAZY = {
    "StepTimer": ("perfcore.timing", "StepTimer"),
    "RunResult": ("perfcore.timing", "RunResult"),
    "Workload": ("perfcore.workloads", "Workload"),
    "transfer": ("perfcore.experiments.transfer", None),
    "graphs": ("perfcore.experiments.graphs", None),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = importlib.import_module(module)
        if attr is not None:
            value = getattr(value, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'perfcore' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "__version__",
    "StepTimer",
    "RunResult",
    "Workload",
    "transfer",
    "graphs",
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
