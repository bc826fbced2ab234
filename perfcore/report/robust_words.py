"""The trimmed breakdown in words: how it was estimated, and the outlier steps it set apart (what they
were against the median step and where their extra time went), from analysis.uncertainty's figures. An
older document kept its sentences: they are read back as they are."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.uncertainty import LEVEL, OUTLIER_MADS, OUTLIER_MIN_RATIO, TRIM_AT_MOST
from perfcore.analysis.units import fmt_ms, fmt_share

__all__ = ["method_words", "outliers_sentence", "say_robust"]


def method_words(rb: Mapping[str, Any]) -> str:
    """How the trimmed estimate and its interval were made."""
    if isinstance(rb.get("method"), str):
        return rb["method"]
    return (
        f"trimmed: steps set apart as outliers (> {OUTLIER_MADS:g} MADs and {OUTLIER_MIN_RATIO:g}x the "
        f"median step, their extra time not a data wait; at most {100 * TRIM_AT_MOST:.0f}% of the steps); "
        f"{100 * float(rb.get('level') or LEVEL):.0f}% block bootstrap over {rb.get('blocks')} block(s) of "
        "consecutive steps"
    )


def outliers_sentence(o: Mapping[str, Any] | None) -> str:
    """The outlier steps set apart: how many, their wall time against the median step, and the label that
    held their extra time; "" when there were none."""
    if not isinstance(o, Mapping) or not o.get("count"):
        return ""
    if "median_step_ms" not in o:
        return str(o.get("sentence") or "")
    wall, top = o.get("wall_ms") or {}, o.get("excess_label")
    share = (o.get("excess_share") or {}).get(top) if top else None
    lo, hi = fmt_ms(float(wall["min"])), fmt_ms(float(wall["max"]))
    n = int(o["count"])
    return (
        (f"1 outlier step set apart ({hi} " if n == 1 else f"{n} outlier steps set apart ({lo} to {hi} ")
        + f"against a median of {fmt_ms(float(o['median_step_ms']))}"
        + (f"; {fmt_share(float(share))} of their extra time was {top}" if share is not None else "")
        + "): preemption, garbage collection or one-off work, not the loop's steady cost"
    )


def say_robust(rb: Any) -> Any:
    """A run document's trimmed breakdown with its words beside its figures, in place, for the writer."""
    if isinstance(rb, dict) and "blocks" in rb:
        rb["method"] = method_words(rb)
        if isinstance(rb.get("outliers"), dict):
            rb["outliers"]["sentence"] = outliers_sentence(rb["outliers"])
    return rb
