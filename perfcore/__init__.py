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
    from perfcore.run.child.magic import load_ipython_extension as _load

    _load(ipython)


# Names that pull in numpy, pandas or torch load on first use, so `import perfcore` (and the CLI's
# --help) stay light: name -> (module, attribute or None for the module itself).
_LAZY = {
    "StepTimer": ("perfcore.timing", "StepTimer"),
    "RunResult": ("perfcore.timing", "RunResult"),
    "Workload": ("perfcore.workloads", "Workload"),
    "transfer": ("perfcore.experiments.transfer", None),
    "graphs": ("perfcore.experiments.graph_capture", None),
    "summary": ("perfcore.report.summary", "summary"),
}


def __getattr__(name: str):
    import importlib
    import importlib.util

    if name in _LAZY:
        module, attr = _LAZY[name]
        value = importlib.import_module(module)
        if attr is not None:
            value = getattr(value, attr)
    elif not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        # perfcore.workloads.Workload, perfcore.errors.UsageError, ... work after a bare import too.
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'perfcore' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "__version__",
    "StepTimer",
    "RunResult",
    "Workload",
    "transfer",
    "graphs",
    "summary",
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
