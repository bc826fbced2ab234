"""The HTML verdict card's words: a headline (the verdict's name and what its time is; the card's tiles
give its ms, share and gain) and at most two short lines (why it is uncertain, diagnose's check of it,
what would settle a borderline one), from the verdict's facts; the long words are verdict_words'."""

from __future__ import annotations

from perfcore.analysis.results import Level, Verdict
from perfcore.analysis.uncertainty import LEVEL, steps_to_settle
from perfcore.analysis.units import fmt_band, fmt_share, fmt_x
from perfcore.analysis.verdict import WARN_SHARE
from perfcore.report.words import WHAT
from perfcore.report.words.verdict import NO_STEPS, fit, plain_words, straggler_head, verdict_name

__all__ = ["card_lines"]


def card_lines(t: Verdict) -> tuple[str, list[str]]:
    """The HTML verdict card's words: a headline (the bound, its level, what the time is; the card's
    tiles give its ms, share and gain) and at most two short lines (why the verdict is uncertain,
    diagnose's check of it, what would settle a borderline one); summary_words goes in its "why" panel."""
    if not t.decided:
        return NO_STEPS, []
    top = next((c for c in t.named if c.label == t.primary), None)
    if t.level is Level.HEALTHY:
        head = f"{verdict_name(t)}: nothing outside compute reaches {100 * WARN_SHARE:.0f}% of the step"
    elif t.straggler is not None and t.bound == "straggler":
        head = fit(*straggler_head(t))  # the card says why it is uncertain below
    elif top is not None:
        head = f"{verdict_name(t)}: {WHAT[top.label]}"
    else:
        return plain_words(t).split("; ")[0], []
    lines = []
    if t.uncertain:
        lines.append("uncertain: other processes used the machine during the run (see Warnings)")
    check = next((c for c in t.checks if c.status is not None), None)
    if check is not None and check.measured_speedup is not None:  # diagnose's test of the verdict
        lines.append(
            f"checked: {check.name} measured {fmt_x(check.measured_speedup)}"
            + (f" against {fmt_x(check.predicted_speedup)} predicted" if check.predicted_speedup else "")
            + f": {check.status.value}"
        )
    if top is not None and top.share_band is not None and (t.level is Level.BORDERLINE or top.borderline_tier):
        tier = top.borderline_tier or WARN_SHARE
        more = steps_to_settle(t.steps, top.share, top.share_band, tier) if t.steps else None
        lines.append(
            f"near the {100 * tier:.0f}% line: its {100 * LEVEL:.0f}% interval "
            f"{fmt_band(top.share_band[0], top.share_band[1], fmt_share)}; "
            + (
                f"--steps {more} or a quieter machine would settle it"
                if more and more > t.steps
                else "more steps would settle it"
            )
        )
    return head, lines[:2]
