"""Facts from the forward / backward / optimizer split the steps table already carries (forward_ms,
backward_ms, optimizer_ms per step): an optimizer heavy enough that its fused or foreach form pays,
and a backward far above twice the forward. Pure functions returning typed facts; no sentences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import numpy as np

from perfcore.analysis.attribution import measured_mask
from perfcore.analysis.uncertainty import outlier_mask

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "SplitShares",
    "OptimizerFact",
    "BackwardFact",
    "split_shares",
    "optimizer_fact",
    "backward_fact",
    "OPTIMIZER_SHARE",
    "BACKWARD_RATIO",
    "SAVED_FRACTION",
]

OPTIMIZER_SHARE = 0.15  # an optimizer step above this share of the step is worth a faster form
BACKWARD_RATIO = 3.0  # backward usually costs ~2x forward; above 3x something adds to it
# Share of the optimizer step's time a form saves against the per-parameter loop, as (low, high), by
# (keyword, device type): AdamW on one CPU thread, 24 small to 8 large tensors, torch 2.14, the extremes of
# two runs of bench/bench_optimizer_forms.py on a loaded two-core machine. A pair with no entry has no
# measured band: its gain is "up to" the optimizer's whole time.
SAVED_FRACTION: dict[tuple[str, str], tuple[float, float]] = {
    ("fused", "cpu"): (0.73, 0.95),
    ("foreach", "cpu"): (0.0, 0.33),
}
LIKELY_BACKWARD = (
    "activation_checkpointing",
    "requires_grad_on_frozen_layers",
    "scatter_or_index_backward",
    "backward_hooks",
)


@dataclass(frozen=True)
class SplitShares:
    step_ms: float
    forward_ms: float
    backward_ms: float
    optimizer_ms: float
    forward_share: float
    backward_share: float
    optimizer_share: float


@dataclass(frozen=True)
class OptimizerFact:
    optimizer: str  # the class, as the user names it: torch.optim.AdamW
    keyword: str  # fused | foreach
    device: str
    share: float
    optimizer_ms: float
    step_ms: float
    saved_ms: tuple[float, float]  # expected saving per step (low, high)
    measured: bool  # saved_ms from a measured band, or only bounded by the optimizer's time
    snippet: str  # the call to write: torch.optim.AdamW(..., fused=True)
    site: str | None = None  # file:line where the user made the optimizer (the line to change)


@dataclass(frozen=True)
class BackwardFact:
    ratio: float  # backward_ms / forward_ms
    forward_ms: float
    backward_ms: float
    excess_ms: float  # backward beyond twice the forward: what a usual backward would not cost
    step_ms: float
    likely: tuple[str, ...]  # LIKELY_BACKWARD codes, most common first


def split_shares(steps: pd.DataFrame) -> SplitShares | None:
    """Mean forward/backward/optimizer ms of the measured steps and their shares of the step; None when
    the table has no split (a loop with no backward or optimizer seen) or no measured step."""
    if not {"forward_ms", "backward_ms", "optimizer_ms", "wall_ms"} <= set(steps.columns):
        return None
    keep = measured_mask(steps)
    if not keep.any():
        return None
    # The steps the table and the verdict quote: the outliers robust_breakdown sets apart are set apart here
    # too, so a saving is of the step the report names (a mean inflated by preempted steps said "saves
    # 254-331 us" of an optimizer whose median step was 56 us).
    wall = steps["wall_ms"].to_numpy(dtype=float)
    load = steps["load_ms"].to_numpy(dtype=float) if "load_ms" in steps else np.zeros(len(steps))
    idx = np.flatnonzero(keep)
    keep[idx[outlier_mask(wall[idx], load[idx])]] = False
    # Each column's kept rows, never a row selection of the whole table (a copy of every column).
    step, fw, bw, opt = (
        float(steps[c].to_numpy(dtype=float)[keep].mean())
        for c in ("wall_ms", "forward_ms", "backward_ms", "optimizer_ms")
    )
    if step <= 0:
        return None
    return SplitShares(step, fw, bw, opt, fw / step, bw / step, opt / step)


def optimizer_fact(
    split: SplitShares,
    optimizer: str,
    settings: Mapping[str, object],
    accepts: frozenset[str],
    device: str,
    fused_devices: frozenset[str] = frozenset(),
    site: str | None = None,
) -> OptimizerFact | None:
    """The faster form of the user's optimizer when it takes more than OPTIMIZER_SHARE of the step.

    optimizer: its class's name as imported (torch.optim.AdamW); settings: its current defaults (foreach,
    fused); accepts: the keywords its constructor takes in the installed torch; device: where its
    parameters live (cuda, cpu); fused_devices: where that torch has fused kernels. fused is preferred
    where it runs (on CPU it saved 73-95% of the loop's time, foreach 0-33%); foreach otherwise.
    None when the share is small or the optimizer is already in its fastest available form.
    """
    if split.optimizer_share <= OPTIMIZER_SHARE:
        return None
    if settings.get("fused"):
        return None
    if "fused" in accepts and device in fused_devices:
        keyword = "fused"
    elif "foreach" in accepts and not settings.get("foreach") and device != "cuda":
        # On CUDA foreach is already the default (foreach=None picks it): only fused is faster there.
        keyword = "foreach"
    else:
        return None
    band = SAVED_FRACTION.get((keyword, device))
    lo, hi = band if band else (0.0, 1.0)
    return OptimizerFact(
        optimizer,
        keyword,
        device,
        split.optimizer_share,
        split.optimizer_ms,
        split.step_ms,
        (lo * split.optimizer_ms, hi * split.optimizer_ms),
        band is not None,
        f"{optimizer}(..., {keyword}=True)",
        site,
    )


def backward_fact(split: SplitShares) -> BackwardFact | None:
    """A backward above BACKWARD_RATIO x the forward (and over 10% of the step), else None."""
    if split.forward_ms <= 0 or split.backward_ms < BACKWARD_RATIO * split.forward_ms:
        return None
    excess = split.backward_ms - 2.0 * split.forward_ms
    if excess < 0.10 * split.step_ms:
        return None
    return BackwardFact(
        split.backward_ms / split.forward_ms,
        split.forward_ms,
        split.backward_ms,
        excess,
        split.step_ms,
        LIKELY_BACKWARD,
    )
