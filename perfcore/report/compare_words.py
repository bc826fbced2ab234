"""compare's words: what changed between two runs (analysis.compare.Comparison) as the terminal's lines and
the HTML page's sentence, each word chosen from the status beside its number."""

from __future__ import annotations

from perfcore.analysis.compare import Comparison
from perfcore.analysis.status import Change
from perfcore.analysis.units import fmt_ms, fmt_x
from perfcore.report.verdict_words import level_word, summary_words, verdict_name

__all__ = ["change_sentence", "step_words", "render_compare"]


def change_sentence(doc: Comparison) -> str:
    """Whether the verdict changed: its name before and after, and the primary cause or the tier that moved."""
    a, b = doc.a.verdict, doc.b.verdict
    if not doc.verdict_changed:
        return f"verdict unchanged: {verdict_name(a)}"
    if doc.primary_changed:
        return (
            f"verdict changed: {verdict_name(a)} -> {verdict_name(b)}; primary cause "
            f"{a.primary or 'none'} -> {b.primary or 'none'}"
        )
    return (
        f"verdict changed: {verdict_name(a)} -> {verdict_name(b)} (same primary cause, "
        f"{level_word(a.level)} -> {level_word(b.level)})"
    )


# B against A, by the change's status: the word sits beside the ratio it describes.
_CHANGE = {Change.FASTER: "B faster", Change.SLOWER: "B slower", Change.WITHIN_NOISE: "within the runs' noise"}


def step_words(doc: Comparison) -> str:
    """The step time from A to B, the change and the ratio, with what the status says of it."""
    said = _CHANGE.get(doc.change, "") if doc.change is not None else ""
    noise = doc.noise_ms
    if said and noise is not None:
        said += f" ({fmt_ms(noise)})" if doc.change is Change.WITHIN_NOISE else f" (beyond the noise, {fmt_ms(noise)})"
    tail = f", {said}" if said else ""
    return (
        f"step time: A {fmt_ms(doc.a.step_ms)} -> B {fmt_ms(doc.b.step_ms)} "
        f"({doc.step_time_change_pct:+.1f}%, speedup {fmt_x(doc.speedup)}{tail})"
    )


def render_compare(doc: Comparison) -> str:
    """The terminal's compare: the step time, the verdict change, both verdicts, and the per-label and
    per-kernel-category table (ms per step)."""
    lines = [
        step_words(doc),
        change_sentence(doc),
        f"  A: {summary_words(doc.a.verdict)}",
        f"  B: {summary_words(doc.b.verdict)}",
        f"  {'label':<9} {'A ms':>9} {'B ms':>9} {'delta':>9}",
    ]
    for lb, v in doc.labels.items():
        lines.append(f"  {lb:<9} {v.a_ms:>9.2f} {v.b_ms:>9.2f} {v.delta_ms:>+9.2f}")
    if doc.kernel_categories:
        lines.append(f"  {'kernel category':<20} {'A ms':>9} {'B ms':>9} {'delta':>9}")
        for c, v in doc.kernel_categories.items():
            lines.append(f"  {c:<20} {v.a_ms:>9.2f} {v.b_ms:>9.2f} {v.delta_ms:>+9.2f}")
    return "\n".join(lines)
