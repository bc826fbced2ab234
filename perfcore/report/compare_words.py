"""compare's words: what changed between two runs (perfcore.compare/1, analysis.compare's facts) as the
terminal's lines and the HTML page's sentence, each word chosen from the status beside its number."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.units import fmt_ms, fmt_x
from perfcore.report.verdict_words import level_word, verdict_name

__all__ = ["side_name", "change_sentence", "step_words", "render_compare", "say"]


def side_name(side: Mapping[str, Any]) -> str:
    """A run's verdict in a few words, as every verdict is named (verdict_words.verdict_name); a document
    written before compare kept each side's decision keeps the words it stored."""
    if isinstance(side.get("decision"), Mapping):
        return verdict_name(side["decision"])
    if side.get("named"):
        return f"{side['named']} ({side.get('level')})"
    return str(side.get("verdict") or ("compute-bound (healthy)" if side.get("healthy") else "no steps measured"))


def change_sentence(doc: Mapping[str, Any]) -> str:
    """Whether the verdict changed: its name before and after, and the primary cause or the tier that moved.
    A document written before compare kept the facts keeps the sentence it was written with."""
    ch = doc.get("verdict_change") or {}
    if "a_level" not in ch:
        return str(ch.get("sentence") or "")
    a, b = doc.get("a") or {}, doc.get("b") or {}
    if not ch.get("changed"):
        return f"verdict unchanged: {side_name(a)}"
    if ch.get("primary_changed"):
        return (
            f"verdict changed: {side_name(a)} -> {side_name(b)}; primary cause "
            f"{ch.get('a_primary') or 'none'} -> {ch.get('b_primary') or 'none'}"
        )
    return (
        f"verdict changed: {side_name(a)} -> {side_name(b)} (same primary cause, "
        f"{level_word(ch.get('a_level'))} -> {level_word(ch.get('b_level'))})"
    )


# B against A, by the change's status: the word sits beside the ratio it describes.
_CHANGE = {"faster": "B faster", "slower": "B slower", "within noise": "within the runs' noise"}


def step_words(doc: Mapping[str, Any]) -> str:
    """The step time from A to B, the change and the ratio, with what the status says of it."""
    a, b = doc.get("a") or {}, doc.get("b") or {}
    said = _CHANGE.get(str(doc.get("change")), "")
    noise = doc.get("noise_ms")
    if said and noise is not None:
        said += (
            f" ({fmt_ms(noise)})" if doc.get("change") == "within noise" else f" (beyond the noise, {fmt_ms(noise)})"
        )
    tail = f", {said}" if said else ""
    return (
        f"step time: A {fmt_ms(a.get('step_ms'))} -> B {fmt_ms(b.get('step_ms'))} "
        f"({float(doc.get('step_time_change_pct') or 0.0):+.1f}%, speedup {fmt_x(doc.get('speedup'))}{tail})"
    )


def render_compare(doc: Mapping[str, Any]) -> str:
    """The terminal's compare: the step time, the verdict change, both verdicts, and the per-label and
    per-kernel-category table (ms per step)."""
    lines = [
        step_words(doc),
        change_sentence(doc),
        f"  A: {doc['a'].get('verdict') or side_name(doc['a'])}",
        f"  B: {doc['b'].get('verdict') or side_name(doc['b'])}",
        f"  {'label':<9} {'A ms':>9} {'B ms':>9} {'delta':>9}",
    ]
    for lb, v in doc["labels"].items():
        lines.append(f"  {lb:<9} {v['a_ms']:>9.2f} {v['b_ms']:>9.2f} {v['delta_ms']:>+9.2f}")
    if doc["kernel_categories"]:
        lines.append(f"  {'kernel category':<20} {'A ms':>9} {'B ms':>9} {'delta':>9}")
        for c, v in doc["kernel_categories"].items():
            lines.append(f"  {c:<20} {v['a_ms']:>9.2f} {v['b_ms']:>9.2f} {v['delta_ms']:>+9.2f}")
    return "\n".join(lines)


def say(doc: dict[str, Any]) -> dict[str, Any]:
    """The words beside the facts, in place, as compare's JSON has always kept them (verdict_change's
    sentence), for the writer at the edge."""
    if isinstance(doc.get("verdict_change"), dict):
        doc["verdict_change"]["sentence"] = change_sentence(doc)
    return doc
