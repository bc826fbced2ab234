"""Two runs side by side: per-label and per-kernel-category change, and the speedup (pure functions)."""
from __future__ import annotations

from typing import Any

from perfcore.analysis.attribution import LABELS

__all__ = ["compare_runs", "render_compare"]


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    ta, tb = a["step_time_ms"]["mean"], b["step_time_ms"]["mean"]
    labels = {lb: {"a_ms": a["breakdown_ms"][lb], "b_ms": b["breakdown_ms"][lb],
                   "delta_ms": b["breakdown_ms"][lb] - a["breakdown_ms"][lb]} for lb in LABELS}
    cats = {}
    ca, cb = a.get("kernel_categories") or {}, b.get("kernel_categories") or {}
    for c in dict.fromkeys(list(ca) + list(cb)):
        x, y = ca.get(c, {}).get("ms", 0.0), cb.get(c, {}).get("ms", 0.0)
        cats[c] = {"a_ms": x, "b_ms": y, "delta_ms": y - x}
    return {
        "schema": "perfcore.compare/1",
        "a": {"step_ms": ta, "device": a.get("device"), "bound": a["verdict"]["bound"]},
        "b": {"step_ms": tb, "device": b.get("device"), "bound": b["verdict"]["bound"]},
        "speedup": ta / tb if tb else float("inf"),
        "step_time_change_pct": 100 * (tb - ta) / ta if ta else 0.0,
        "labels": labels,
        "kernel_categories": cats,
    }


def render_compare(doc: dict[str, Any]) -> str:
    lines = [f"step time: A {doc['a']['step_ms']:.2f} ms -> B {doc['b']['step_ms']:.2f} ms "
             f"({doc['step_time_change_pct']:+.1f}%, speedup {doc['speedup']:.2f}x)",
             f"  {'label':<9} {'A ms':>9} {'B ms':>9} {'delta':>9}"]
    for lb, v in doc["labels"].items():
        lines.append(f"  {lb:<9} {v['a_ms']:>9.2f} {v['b_ms']:>9.2f} {v['delta_ms']:>+9.2f}")
    if doc["kernel_categories"]:
        lines.append(f"  {'kernel category':<20} {'A ms':>9} {'B ms':>9} {'delta':>9}")
        for c, v in doc["kernel_categories"].items():
            lines.append(f"  {c:<20} {v['a_ms']:>9.2f} {v['b_ms']:>9.2f} {v['delta_ms']:>+9.2f}")
    return "\n".join(lines)
