"""Workloads: a model, its data and how to train it, so experiments can rebuild the loader with
other settings. Built-ins need no download: `demo` (real JPEGs made once and cached), and
`resnet18`, `resnet50`, `vit_b_16` on synthetic images (torchvision; a small CNN without it)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

from perfcore.errors import UsageError
from perfcore.workloads.workload import Workload

__all__ = ["Workload", "load_workload", "BUILTINS"]


BUILTINS = ("demo", "resnet18", "resnet50", "vit_b_16")


def load_workload(spec: str, **kwargs) -> Workload:
    """'demo' | 'resnet18' | ... | 'path/to/file.py:function' | 'package.module:function'."""
    if spec in BUILTINS:
        from perfcore.workloads import builtin

        return getattr(builtin, spec)(**kwargs)
    if ":" not in spec:
        raise UsageError(
            f"unknown workload {spec!r}: use one of {', '.join(BUILTINS)}, or FILE.py:FUNCTION / "
            "module:function returning perfcore.Workload"
        )
    target, func = spec.rsplit(":", 1)
    try:
        if target.endswith(".py") or "/" in target:
            path = Path(target)
            if not path.is_file():
                raise UsageError(f"workload file not found: {target}")
            mspec = importlib.util.spec_from_file_location(f"perfcore_workload_{path.stem}", path)
            module = importlib.util.module_from_spec(mspec)
            sys.modules[mspec.name] = module  # DataLoader workers (spawn) must be able to find it
            mspec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except UsageError:
        raise
    except Exception as e:
        raise UsageError(f"workload {spec!r} failed to import: {type(e).__name__}: {e}") from e
    fn = getattr(module, func, None)
    if fn is None or not callable(fn):
        raise UsageError(f"workload {spec!r}: {target} has no function {func!r}")
    w = _call_factory(spec, fn, kwargs)
    if not isinstance(w, Workload):
        raise UsageError(f"workload {spec!r} returned {type(w).__name__}, not perfcore.Workload")
    return w


def _call_factory(spec: str, fn: Callable, kwargs: dict[str, Any]) -> Any:
    """The user's factory called; what goes wrong inside it is theirs, named at their file and line."""
    import inspect
    import traceback

    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError as e:
        raise UsageError(
            f"workload {spec!r}: perfcore calls {fn.__name__}() with no arguments, but {e}; "
            "give its parameters defaults"
        ) from e
    except ValueError:
        pass  # a builtin without a signature: just call it
    try:
        return fn(**kwargs)
    except UsageError:
        raise
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)
        where = f" at {tb[-1].filename}:{tb[-1].lineno}" if len(tb) > 1 else ""
        raise UsageError(f"workload {spec!r}: your {fn.__name__}() raised {type(e).__name__}: {e}{where}") from e
