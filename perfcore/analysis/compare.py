"""Two runs side by side: per-label and per-kernel-category change, the speedup, and whether the verdict
or its primary cause changed (both decided again by verdict.decide, so old documents compare too)."""

from __future__ import annotations

from typing import Any

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.verdict import decide_run

__all__ = ["compare_runs", "render_compare"]


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
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
    va, vb = decide_run(a), decide_run(b)
    return {
        "schema": "perfcore.compare/1",
        "a": {
            "step_ms": ta,
            "device": a.get("device"),
            "bound": va["bound"],
            "level": va["level"],
            "decision": va,  # its words: report.verdict_words.say_compare
        },
        "b": {
            "step_ms": tb,
            "device": b.get("device"),
            "bound": vb["bound"],
            "level": vb["level"],
            "decision": vb,
        },
        "verdict_change": _verdict_change(va, vb),
        "speedup": ta / tb if tb else float("inf"),
        "step_time_change_pct": 100 * (tb - ta) / ta if ta else 0.0,
        "labels": labels,
        "kernel_categories": cats,
    }


def _verdict_change(va: dict[str, Any], vb: dict[str, Any]) -> dict[str, Any]:
    def name(v):
        if not v["causes"]:
            return "healthy, compute-bound" if v["healthy"] else "no steps measured"
        return f"{v['causes'][0]['bound']} ({v['level']})"

    primary = va["primary"] != vb["primary"]
    changed = primary or va["level"] != vb["level"]
    if not changed:
        sentence = f"verdict unchanged: {name(va)}"
    elif primary:
        sentence = (
            f"verdict changed: {name(va)} -> {name(vb)}; primary cause {va['primary'] or 'none'} -> "
            f"{vb['primary'] or 'none'}"
        )
    else:
        sentence = f"verdict changed: {name(va)} -> {name(vb)} (same primary cause, {va['level']} -> {vb['level']})"
    return {
        "changed": changed,
        "primary_changed": primary,
        "a_primary": va["primary"],
        "b_primary": vb["primary"],
        "sentence": sentence,
    }


def render_compare(doc: dict[str, Any]) -> str:
    lines = [
        f"step time: A {doc['a']['step_ms']:.2f} ms -> B {doc['b']['step_ms']:.2f} ms "
        f"({doc['step_time_change_pct']:+.1f}%, speedup {doc['speedup']:.2f}x)",
        doc["verdict_change"]["sentence"],
        f"  A: {doc['a'].get('verdict', '')}",
        f"  B: {doc['b'].get('verdict', '')}",
        f"  {'label':<9} {'A ms':>9} {'B ms':>9} {'delta':>9}",
    ]
    for lb, v in doc["labels"].items():
        lines.append(f"  {lb:<9} {v['a_ms']:>9.2f} {v['b_ms']:>9.2f} {v['delta_ms']:>+9.2f}")
    if doc["kernel_categories"]:
        lines.append(f"  {'kernel category':<20} {'A ms':>9} {'B ms':>9} {'delta':>9}")
        for c, v in doc["kernel_categories"].items():
            lines.append(f"  {c:<20} {v['a_ms']:>9.2f} {v['b_ms']:>9.2f} {v['delta_ms']:>+9.2f}")
    return "\n".join(lines)
