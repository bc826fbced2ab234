"""Two runs side by side: per-label and per-kernel-category change, the speedup with its status against
both runs' noise, and whether the verdict or its primary cause changed (both decided again by
verdict.decide_run, so old documents compare too). Facts only: report/compare_words says them."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.checks import difference_noise_ms
from perfcore.analysis.status import change_of
from perfcore.analysis.verdict import decide_run

__all__ = ["compare_runs"]


def _side(doc: Mapping[str, Any], v: Mapping[str, Any]) -> dict[str, Any]:
    """One run's figures and verdict as compare keeps them: `named` is the first cause's bound (what the
    verdict names), None when it names none (healthy, or nothing measured)."""
    st = doc.get("step_time_ms") or {}
    return {
        "step_ms": st["mean"],
        "step_sem_ms": st.get("sem"),
        "device": doc.get("device"),
        "bound": v["bound"],
        "level": v["level"],
        "named": v["causes"][0]["bound"] if v["causes"] else None,
        "healthy": bool(v["healthy"]),
        "primary": v["primary"],
        "decision": dict(v),  # its words: report.verdict_words.say_compare
    }


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """perfcore.compare/1: A's and B's figures and verdicts, `change` (B's speed against A's: faster,
    slower or within noise, with noise_ms from both runs' spread where they report one), the change per
    label and per kernel category, and verdict_change (what of the verdict changed)."""
    ta, tb = a["step_time_ms"]["mean"], b["step_time_ms"]["mean"]
    labels = {
        lb: {
            "a_ms": a["breakdown_ms"][lb],
            "b_ms": b["breakdown_ms"][lb],
            "delta_ms": b["breakdown_ms"][lb] - a["breakdown_ms"][lb],
        }
        for lb in LABELS
    }
    cats = {}
    ca, cb = a.get("kernel_categories") or {}, b.get("kernel_categories") or {}
    for c in dict.fromkeys(list(ca) + list(cb)):
        x, y = ca.get(c, {}).get("ms", 0.0), cb.get(c, {}).get("ms", 0.0)
        cats[c] = {"a_ms": x, "b_ms": y, "delta_ms": y - x}
    sa, sb = _side(a, decide_run(a)), _side(b, decide_run(b))
    speedup = ta / tb if tb else float("inf")
    noise = difference_noise_ms(sa["step_sem_ms"], sb["step_sem_ms"])
    change = change_of(speedup, noise / ta if noise is not None and ta else None) if tb and ta else None
    return {
        "schema": "perfcore.compare/1",
        "a": sa,
        "b": sb,
        "verdict_change": verdict_change(sa, sb),
        "speedup": speedup,
        "change": change.value if change else None,
        "noise_ms": noise,
        "step_time_change_pct": 100 * (tb - ta) / ta if ta else 0.0,
        "labels": labels,
        "kernel_categories": cats,
    }


def verdict_change(sa: Mapping[str, Any], sb: Mapping[str, Any]) -> dict[str, Any]:
    """What changed from A's verdict to B's: the primary cause, or only its tier (level)."""
    primary = sa["primary"] != sb["primary"]
    return {
        "changed": primary or sa["level"] != sb["level"],
        "primary_changed": primary,
        "a_primary": sa["primary"],
        "b_primary": sb["primary"],
        "a_level": sa["level"],
        "b_level": sb["level"],
    }
