"""Workloads: a model, its data and how to train it, so experiments can rebuild the loader with
other settings. Built-ins need no download: `demo` (real JPEGs made once and cached), and
`resnet18`, `resnet50`, `vit_b_16` on synthetic images (torchvision; a small CNN without it)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from perfcore.errors import UsageError

__all__ = ["Workload", "load_workload", "BUILTINS"]


@dataclass
class Workload:
    """What an experiment needs to rebuild and run a training step.

    decoders maps a decoder name to a dataset using it ({"pil": ds, "torchvision": ds2}); `dataset`
    is the one used by default (decoder names which).
    """

    dataset: Any
    model: Any
    loss_fn: Callable
    optimizer: Any = None
    batch_size: int = 32
    num_workers: int = 0
    pin_memory: bool = False
    prefetch_factor: int | None = None
    persistent_workers: bool = False
    device: str = "auto"
    decoders: dict[str, Any] = field(default_factory=dict)
    decoder: str | None = None
    collate_fn: Callable | None = None
    name: str = "workload"

    def __post_init__(self):
        d = self.device
        if not hasattr(d, "type") and not (
            d in ("auto", "cpu", "cuda") or (isinstance(d, str) and d.startswith("cuda:") and d[5:].isdigit())
        ):
            raise UsageError(
                f"Workload(device=...): {str(d)[:40]!r} is not a device; use 'auto', 'cpu', 'cuda' or 'cuda:N'"
            )

    def loader_settings(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory,
            "prefetch_factor": self.prefetch_factor,
            "persistent_workers": self.persistent_workers,
        }

    def with_decoder(self, name: str) -> "Workload":
        if name not in self.decoders:
            raise UsageError(f"workload {self.name!r} has no decoder {name!r} (it has: {', '.join(self.decoders)})")
        return replace(self, dataset=self.decoders[name], decoder=name)

    def loader(self, **overrides):
        """A fresh DataLoader with the workload's settings, overridden by `overrides`."""
        from torch.utils.data import DataLoader

        s = {**self.loader_settings(), **{k: v for k, v in overrides.items() if v is not None}}
        if s["batch_size"] is None or int(s["batch_size"]) <= 0:
            raise UsageError(f"batch_size must be > 0, got {s['batch_size']}")
        if int(s["num_workers"]) < 0:
            raise UsageError(f"num_workers must be >= 0, got {s['num_workers']}")
        kw: dict[str, Any] = dict(
            batch_size=int(s["batch_size"]),
            num_workers=int(s["num_workers"]),
            pin_memory=bool(s["pin_memory"]),
            shuffle=True,
            drop_last=True,
            collate_fn=self.collate_fn,
        )
        if kw["num_workers"] > 0:
            kw["persistent_workers"] = bool(s["persistent_workers"])
            if s["prefetch_factor"]:
                kw["prefetch_factor"] = int(s["prefetch_factor"])
        return DataLoader(self.dataset, **kw)


def _builtin(name: str) -> Callable[..., Workload]:
    from perfcore.workloads import builtin

    return getattr(builtin, name)


BUILTINS = ("demo", "resnet18", "resnet50", "vit_b_16")


def load_workload(spec: str, **kwargs) -> Workload:
    """'demo' | 'resnet18' | ... | 'path/to/file.py:function' | 'package.module:function'."""
    if spec in BUILTINS:
        return _builtin(spec)(**kwargs)
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
