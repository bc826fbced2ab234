"""The Workload: a model, its data and how to train it, so experiments can rebuild the loader with
other settings. A leaf of the package: the built-ins and the loader of workload specs both use it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from perfcore.errors import UsageError

__all__ = ["Workload"]


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
