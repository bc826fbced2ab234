"""The HTML verdict card's words: a headline (the verdict's name and what its time is; the card's tiles
give its ms, share and gain) and at most two short lines (why it is uncertain, diagnose's check of it,
what would settle a borderline one), from the verdict's facts; the long words are verdict_words'."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.results import Level, Verdict
from perfcore.analysis.uncertainty import LEVEL, steps_to_settle
from perfcore.analysis.units import fmt_band, fmt_share, fmt_x
from perfcore.analysis.verdict import WARN_SHARE
from perfcore.report.label_words import MALFORMED, WHAT
from perfcore.report.verdict_words import headline, plain_words, stored_words, verdict_name

__all__ = ["card_lines"]


def card_lines(v: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The HTML verdict card's words: a headline (the bound, its level, what the time is; the card's
    tiles give its ms, share and gain) and at most two short lines (why the verdict is uncertain,
    diagnose's check of it, what would settle a borderline one); summary_words goes in its "why" panel."""
    try:
        return _card_lines(v)
    except MALFORMED:
        return stored_words(v).split("; ")[0], []


def _card_lines(v: Mapping[str, Any]) -> tuple[str, list[str]]:
    """card_lines, on facts of the shape this version writes."""
    if v.get("bound") in (None, "unknown") or not v.get("step_ms"):
        return str(v.get("summary") or "no steps measured"), []
    t = Verdict.from_dict(v)
    job = v.get("straggler") if isinstance(v.get("straggler"), Mapping) else None
    top = next((c for c in t.named if c.label == t.primary), None)
    if t.level is Level.HEALTHY:
        head = f"{verdict_name(v)}: nothing outside compute reaches {100 * WARN_SHARE:.0f}% of the step"
    elif job and t.bound == "straggler":
        head = headline(v).replace(" [uncertain: busy]", "")  # the card says why it is uncertain below
    elif top is not None:
        head = f"{verdict_name(v)}: {WHAT[top.label]}"
    else:  # a document without the verdict's numbers (written before they were kept)
        return plain_words(v).split("; ")[0], []
    lines = []
    if t.uncertain:
        lines.append("uncertain: other processes used the machine during the run (see Warnings)")
    check = next((c for c in v.get("checks") or [] if isinstance(c, Mapping) and c.get("status")), None)
    if check is not None and check.get("measured_speedup") is not None:  # diagnose's test of the verdict
        lines.append(
            f"checked: {check.get('experiment')} measured {fmt_x(check['measured_speedup'])}"
            + (f" against {fmt_x(check['predicted_speedup'])} predicted" if check.get("predicted_speedup") else "")
            + f": {check['status']}"
        )
    if top is not None and top.share_band is not None and (t.level is Level.BORDERLINE or top.borderline_tier):
        tier = top.borderline_tier or WARN_SHARE
        more = steps_to_settle(t.steps, top.share, top.share_band, tier) if t.steps else None
        lines.append(
            f"borderline: its {100 * LEVEL:.0f}% interval {fmt_band(top.share_band[0], top.share_band[1], fmt_share)} "
            f"straddles {100 * tier:.0f}%; "
            + (
                f"--steps {more} or a quieter machine would settle it"
                if more and more > t.steps
                else "more steps would settle it"
            )
        )
    return head, lines[:2]
