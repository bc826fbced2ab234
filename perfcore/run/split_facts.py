"""perfcore run's compute facts: what the training process knows of the user's optimizer (its class as the
user imports it, its foreach/fused settings, the keywords its constructor takes and where this torch has
fused kernels), carried in the part's facts, and the document's "compute_facts" built from it and the
steps' forward/backward/optimizer split (analysis.compute_split)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Mapping

__all__ = ["optimizer_facts", "compute_document"]


def optimizer_facts(opt: Any) -> dict[str, Any] | None:
    """Plain facts about optimizer `opt` (None when it cannot be read: the run goes on without them)."""
    try:
        cls = type(opt)
        module = cls.__module__ or ""
        # torch.optim.adamw.AdamW is imported as torch.optim.AdamW: name it the way the user writes it.
        name = f"torch.optim.{cls.__qualname__}" if module.startswith("torch.optim") else f"{module}.{cls.__qualname__}"
        params = [p for g in opt.param_groups for p in g["params"]]
        device = params[0].device.type if params else "cpu"
        try:
            from torch.optim.optimizer import _get_fused_kernels_supported_devices as fused_on

            fused = sorted(fused_on())
        except Exception:  # an older torch: fused only where the class says, on CUDA
            fused = ["cuda"]
        settings = {
            k: opt.defaults.get(k) for k in ("foreach", "fused") if isinstance(opt.defaults.get(k), (bool, type(None)))
        }
        return {
            "class": name,
            "settings": settings,
            "accepts": sorted(inspect.signature(cls).parameters),
            "device": device,
            "fused_devices": fused,
        }
    except Exception:
        return None


def compute_document(facts: Mapping[str, Any] | None, table) -> dict[str, Any]:
    """run.json's "compute_facts": the split's shares, and the optimizer and backward facts where they hold."""
    from perfcore.analysis.compute_split import backward_fact, optimizer_fact, split_shares

    split = split_shares(table)
    if split is None:
        return {}
    opt = None
    if facts:
        opt = optimizer_fact(
            split,
            str(facts["class"]),
            dict(facts["settings"]),
            frozenset(facts["accepts"]),
            str(facts["device"]),
            frozenset(facts["fused_devices"]),
            site=str(facts["site"]) if facts.get("site") else None,
        )
    bwd = backward_fact(split)
    return {
        "compute_facts": {
            "split": dataclasses.asdict(split),
            "optimizer": dataclasses.asdict(opt) if opt else None,
            "backward": dataclasses.asdict(bwd) if bwd else None,
        }
    }
