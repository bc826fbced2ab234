"""The trimmed breakdown's outlier steps in words: what they were against the median step and where their
extra time went, from analysis.uncertainty's figures."""

from __future__ import annotations

from perfcore.analysis.run_parts import Outliers
from perfcore.analysis.units import fmt_ms, fmt_share

__all__ = ["outliers_sentence"]


def outliers_sentence(o: Outliers | None) -> str:
    """The outlier steps set apart: how many, their wall time against the median step, and the label that
    held their extra time; "" when there were none (or their figures were not kept)."""
    if o is None or not o.count or o.median_step_ms is None or o.wall_ms is None:
        return ""
    top = o.excess_label
    share = o.excess_share.get(top) if top else None
    lo, hi = fmt_ms(o.wall_ms.min), fmt_ms(o.wall_ms.max)
    n = int(o.count)
    return (
        (f"1 outlier step set apart ({hi} " if n == 1 else f"{n} outlier steps set apart ({lo} to {hi} ")
        + f"against a median of {fmt_ms(o.median_step_ms)}"
        + (f"; {fmt_share(float(share))} of their extra time was {top}" if share is not None else "")
        + "): preemption, garbage collection or one-off work, not the loop's steady cost"
    )
