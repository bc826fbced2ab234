"""The verdict in words, from the facts analysis.verdict decides (results.Verdict as a document holds it):
the short line for the terminal (verdict_short), the headline and two short lines of the HTML card, and
the long sentence for --explain and the HTML "why" panel (plain_words; summary_words puts what inflated
the steps first). say_verdict stores the long words beside the facts where a writer keeps a document.
A document written before the facts were kept (no `on_gpu` in its verdict) keeps the words it stored."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.results import Cause, Level, Verdict
from perfcore.analysis.uncertainty import LEVEL, steps_to_settle
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_share
from perfcore.analysis.verdict import CRITICAL_SHARE, WARN_SHARE
from perfcore.report.check_words import check_text, loading_text
from perfcore.report.label_words import (
    MALFORMED,
    WHAT,
    evidence_words,
    gain_words,
    interference_detail,
    interference_sentence,
    startup_sentence,
    what_of,
)

__all__ = [
    "THRESHOLDS_RATIONALE",
    "WIDTH",
    "fit",
    "has_facts",
    "plain_words",
    "summary_words",
    "say_verdict",
    "EXCESS_PHRASE",
    "verdict_name",
    "say_compare",
    "verdict_short",
    "stored_words",
    "cause_words",
    "headline",
    "level_word",
    "preface",
    "straggler_lead",
]

THRESHOLDS_RATIONALE = (
    "a cause is named at >= 10% of the step (moderate), major at >= 20%; otherwise healthy, "
    "compute-bound (seed stage 1: >= 60% busy is healthy; XProf input-bound 5%/20%; "
    "TraceML 10%/20%)"
)
# The short report's line width: a line over it wraps in an 80-120 column terminal and reads as two.
WIDTH = 120
# A cause's tier in plain words: the verdict's "warn" is a threshold's name, not a finding, and "critical"
# read as an alarm to new users for a 27% share that costs a quarter of the step, not a failure.
LEVEL_WORDS = {"warn": "moderate", "critical": "major", "borderline": "borderline", "minor": "minor"}


def level_word(level: Any) -> str:
    """A level as run.json holds it ("warn", "critical", or a Level), in the words every output uses."""
    value = str(getattr(level, "value", level) or "")
    return LEVEL_WORDS.get(value, value)


# What a straggler's excess is spent on (a slow rank does more of it), by its excess label.
EXCESS_PHRASE = {
    "load": "its DataLoader waits",
    "compute": "it computes",
    "transfer": "it copies",
    "host": "it spends outside the timed phases",
}
_FORWARD_ONLY_GAIN = "this forward-only loop's steps"


def has_facts(v: Mapping[str, Any]) -> bool:
    """Whether the verdict carries the facts its words are made from (this version's documents)."""
    return isinstance(v, Mapping) and "on_gpu" in v and v.get("bound") not in (None, "unknown")


def _share_band(band) -> str:
    return f", {100 * LEVEL:.0f}% interval {fmt_band(band[0], band[1], fmt_share)}" if band else ""


def _settle(steps: int, c: Cause, tier: float) -> str:
    more = steps_to_settle(steps, c.share, c.share_band, tier) if steps and c.share_band else None
    if more and more > steps:
        return f"about {more} steps (--steps {more}) or a quieter machine would settle it"
    return "more steps or a quieter machine would settle it"


def _short_what(t: Verdict, c: Cause) -> str:
    return what_of(c.label, t.on_gpu).split(" (")[0]


def _core(t: Verdict, v: Mapping[str, Any]) -> str:
    """The decision itself, at length: the named cause, its cost, share and tier, and the gain of removing
    it; or the borderline cause and what would settle it; or healthy compute."""
    named = t.named
    sure = [c for c in named if c.level is not Level.BORDERLINE]
    step = t.step_ms
    if sure:
        top = sure[0]
        what = what_of(top.label, t.on_gpu)
        bound = top.bound + (f" ({v['cause']})" if top.label == "load" and v.get("loading") and v.get("cause") else "")
        tier = CRITICAL_SHARE if top.level is Level.CRITICAL else WARN_SHARE
        gain = gain_words(top.gain.speedup, top.gain.band)
        of = _FORWARD_ONLY_GAIN if t.forward_only else "steps"
        said = (
            f"{bound}: {what} costs {fmt_ms(top.ms_per_step)} of each {fmt_ms(step)} step "
            f"({fmt_share(top.share)}{_share_band(top.share_band)}; {level_word(top.level)} at >= {100 * tier:.0f}%)"
            + (f"; removing it would make {of} {gain}" if gain else "")
        )
        if top.borderline_tier == CRITICAL_SHARE:
            said += (
                f". Borderline {level_word('critical')}: the interval straddles {100 * CRITICAL_SHARE:.0f}%; "
                + _settle(t.steps, top, CRITICAL_SHARE)
            )
        others = [c for c in named if c is not top]
        if others:
            said += ". Also " + ", ".join(
                f"{_short_what(t, c)} {fmt_ms(c.ms_per_step)} ({fmt_share(c.share)}, {level_word(c.level)})"
                for c in others
            )
        return said
    if named:
        top = named[0]
        return (
            f"borderline {top.bound}: {what_of(top.label, t.on_gpu)} costs {fmt_ms(top.ms_per_step)} of each "
            f"{fmt_ms(step)} step ({fmt_share(top.share)}{_share_band(top.share_band)}), which straddles the "
            f"{100 * WARN_SHARE:.0f}% tier: " + _settle(t.steps, top, WARN_SHARE)
        )
    big = t.ranked[0] if t.ranked and t.ranked[0].ms_per_step > 0 else None
    return (
        f"compute-bound (healthy): compute is {fmt_share(t.compute_ms / step if step else 0)} of each "
        f"{fmt_ms(step)} step; no avoidable cause reaches {100 * WARN_SHARE:.0f}%"
        + (f" (largest: {_short_what(t, big)} {fmt_ms(big.ms_per_step)}, {fmt_share(big.share)})" if big else "")
    )


def straggler_lead(job: Mapping[str, Any]) -> str:
    """A job held up by one rank: who waits, how long, and what the slow rank does more of."""
    share = float(job.get("wait_share") or 0.0)
    level = level_word("critical" if share >= CRITICAL_SHARE else "warn")
    ex = str(job.get("excess_label"))
    return (
        f"rank {job.get('slow_rank')} holds up the job: rank {job.get('waiting_rank')} waits "
        f"{fmt_ms(float(job['wait_ms']))} of each {fmt_ms(float(job['step_ms']))} step ({fmt_share(share)}, "
        f"{level}) in collectives for it; its own work is {fmt_ms(float(job.get('work_ms') or 0))} against "
        f"{fmt_ms(float(job.get('others_work_ms') or 0))} on the other ranks, the excess in {ex}: "
        f"{EXCESS_PHRASE.get(ex, ex)} {fmt_ms(float(job.get('excess_ms') or 0))} more per step"
    )


def _plain_words(v: Mapping[str, Any]) -> str:
    """plain_words, on facts of the shape this version writes."""
    if not has_facts(v):
        if v.get("bound") in (None, "unknown") and not v.get("summary"):
            return "no steps measured"
        return str(v.get("plain_summary") or v.get("summary") or "")
    t = Verdict.from_dict(v)
    said = _core(t, v)
    if t.outliers:
        said += f" ({t.outliers} outlier step(s) set apart)"
    if t.startup is not None and t.startup.dominates:
        said += f". Start-up dominates: {startup_sentence(t.startup.to_dict())}"
    if v.get("focus_rank") is not None:
        said += f" on rank {v['focus_rank']}; the other ranks wait for it in comm"
    checks = [check_text(c) for c in v.get("checks") or [] if isinstance(c, Mapping)]
    how = loading_text(v["loading"]) if isinstance(v.get("loading"), Mapping) else ""
    if checks or how:
        said += "".join(f". {c[0].upper()}{c[1:]}" for c in checks if c) + (f". {how}." if how else ".")
    job = v.get("straggler")
    if isinstance(job, Mapping):
        said = f"{straggler_lead(job)}. On rank {job.get('slow_rank')}: {said}"
    return said


def _threads(v: Mapping[str, Any]) -> str:
    """What spinning threads did to the steps, said before the verdict on them."""
    over, busy = v.get("oversubscribed"), v.get("threads_busy")
    if isinstance(over, Mapping):
        kind = "torch" if over.get("source") == "torch" else "OpenMP"
        return (
            f"{over['threads']} {kind} threads on {over['cpus']} CPU(s): OpenMP threads spin when cores are "
            f"oversubscribed, which can make steps many times slower: torch.set_num_threads({over['fits']})"
        )
    if isinstance(busy, Mapping):
        kind = "torch" if busy.get("source") == "torch" else "OpenMP"
        return (
            f"{busy['threads']} {kind} threads had {float(busy['free_cores']):.1f} free core(s) while other "
            f"processes used {float(busy['others_cores']):.1f} of {busy['cpus']} cores: their threads spin "
            "when cores are taken, so these steps are slower than the script's own; measure on a quieter "
            "machine before changing its thread count"
        )
    return ""


def _summary_words(v: Mapping[str, Any]) -> str:
    """summary_words, on facts of the shape this version writes."""
    if not has_facts(v):
        return str(v.get("summary") or plain_words(v))
    plain = plain_words(v)
    intf = v.get("interference")
    # Threads that found their cores taken already say how much of the machine the others used: the
    # interference sentence would say it again.
    said_busy = isinstance(v.get("threads_busy"), Mapping)
    material = isinstance(intf, Mapping) and intf.get("material") and not said_busy
    lead = [_threads(v)] + ([interference_sentence(intf)] if material else [])
    lead = [s for s in lead if s]
    return ". ".join(lead + [f"{plain[0].upper()}{plain[1:]}" if lead else plain])


def _cause_words(v: Mapping[str, Any], c: Mapping[str, Any]) -> tuple[str, str]:
    """cause_words, on facts of the shape this version writes."""
    if not has_facts(v):
        return str(c.get("what") or c.get("label") or ""), str(c.get("evidence") or "")
    by = (v.get("measured_by") or {}).get(c["label"])
    facts = {**c, "step_ms": v["step_ms"], "on_gpu": v["on_gpu"], "measured_by": by}
    return what_of(c["label"], bool(v["on_gpu"])), evidence_words(facts)


def say_verdict(v: dict[str, Any]) -> dict[str, Any]:
    """The words beside the facts, in place, as run.json has always kept them (summary, plain_summary,
    each cause's what and evidence, the thresholds' rationale, start-up's and the interference finding's
    sentences). A writer at the edge calls it; every renderer makes the same words from the same facts."""
    if not isinstance(v, dict):
        return v
    if isinstance(v.get("thresholds"), dict):
        v["thresholds"]["rationale"] = THRESHOLDS_RATIONALE
    if not has_facts(v):
        v.setdefault("summary", plain_words(v))
        return v
    for c in v.get("causes") or []:
        c["what"], c["evidence"] = cause_words(v, c)
    if isinstance(v.get("startup"), dict):
        v["startup"]["sentence"] = startup_sentence(v["startup"])
    if isinstance(v.get("interference"), dict):
        v["interference"].update(say_interference(v["interference"]))
    v["plain_summary"] = plain_words(v)
    v["summary"] = summary_words(v)
    return v


def say_interference(f: Mapping[str, Any]) -> dict[str, str]:
    """An interference finding's sentence and detail, as documents keep them beside its figures."""
    return {"sentence": interference_sentence(f), "detail": interference_detail(f)}


def say_compare(doc: dict[str, Any]) -> dict[str, Any]:
    """Each side of a compare document's verdict in words (`verdict`), beside its decision, in place."""
    for side in ("a", "b"):
        d = doc.get(side)
        if isinstance(d, dict) and isinstance(d.get("decision"), Mapping):
            d["verdict"] = summary_words(d["decision"])
    return doc


def fit(*parts: tuple[str, int]) -> str:
    """The parts in order, each (text, rank): rank 0 always, then the lowest ranked dropped first until the
    line fits in WIDTH. What is left out is in the verdict's long words (--explain, report.html)."""
    keep = [text for text, _ in parts]
    for k in sorted(range(len(parts)), key=lambda k: -parts[k][1]):
        if len("".join(keep)) <= WIDTH or parts[k][1] == 0:
            break
        keep[k] = ""
    return "".join(keep)


def _name(v: Mapping[str, Any], t: Verdict) -> str | None:
    """The verdict's name: its bound and level ("input-bound (major)", "input-bound on rank 1 (moderate)",
    "compute-bound (healthy)", "straggler rank 1 (major)"); None for a document without its numbers."""
    if t.level is Level.HEALTHY:
        return "compute-bound (healthy)"
    job = v.get("straggler") if isinstance(v.get("straggler"), Mapping) else None
    if job and t.bound == "straggler":
        return f"straggler rank {job.get('slow_rank')} ({level_word(t.level)})"
    top = next((c for c in t.named if c.label == t.primary), None)
    if top is None:
        return None
    level = "borderline" if t.level is Level.BORDERLINE else level_word(top.level)
    on = f" on rank {job.get('slow_rank')}" if job else ""  # the slow rank's steps, not the table's rank
    return f"{top.bound}{on} ({level})"


def verdict_name(v: Mapping[str, Any]) -> str:
    """The verdict in a few words (its bound and level), for compare's before -> after; "no steps measured"."""
    try:
        if v.get("bound") in (None, "unknown") or not v.get("step_ms"):
            return "no steps measured"
        return _name(v, Verdict.from_dict(v)) or str(v.get("bound"))
    except MALFORMED:
        return str(v.get("bound") or "no steps measured")


def _head(v: Mapping[str, Any], t: Verdict) -> list[tuple[str, int]] | None:
    """The verdict's short line as ranked parts (fit drops the lowest first), without "verdict: "."""
    busy = (" [uncertain: busy]" if t.uncertain else "", 1)  # the header line says how busy, as measured
    if t.level is Level.HEALTHY:
        big = t.ranked[0] if t.ranked and t.ranked[0].ms_per_step > 0 else None
        return [
            (
                f"{_name(v, t)}: nothing outside compute reaches {100 * WARN_SHARE:.0f}% of a {fmt_ms(t.step_ms)} step",
                0,
            ),
            (f" (largest: {big.label}, {fmt_share(big.share)})" if big else "", 2),
            busy,
        ]
    job = v.get("straggler") if isinstance(v.get("straggler"), Mapping) else None
    if job and t.bound == "straggler":  # a job held up by one rank: the wait, the slow rank, its excess
        return [
            (
                f"{_name(v, t)}: rank {job.get('waiting_rank')} waits {fmt_ms(float(job.get('wait_ms') or 0))} of a "
                f"{fmt_ms(float(job.get('step_ms') or 0))} step ({fmt_share(float(job.get('wait_share') or 0))}) "
                f"for it, {job.get('excess_label')} +{fmt_ms(float(job.get('excess_ms') or 0))}",
                0,
            ),
            busy,
        ]
    top = next((c for c in t.named if c.label == t.primary), None)
    if top is None:  # a document without the verdict's numbers (written before they were kept)
        return None
    band = f", CI {fmt_band(top.share_band[0], top.share_band[1], fmt_share)}" if top.share_band else ""
    # The gain of removing it is said once, on the "try" line that names the change; the interval gives
    # way to the wait for the slow rank and to the busy mark.
    return [
        (
            f"{_name(v, t)}: {WHAT[top.label]}, {fmt_ms(top.ms_per_step)} of a "
            f"{fmt_ms(t.step_ms)} step ({fmt_share(top.share)}",
            0,
        ),
        (band if not job else "", 3),
        (")", 0),
        (
            f"; rank {job.get('waiting_rank')} waits {fmt_share(float(job.get('wait_share') or 0))} for it"
            if job
            else "",
            1,
        ),
        busy,
    ]


def _verdict_short(v: Mapping[str, Any]) -> str:
    """verdict_short, on facts of the shape this version writes."""
    if v.get("bound") in (None, "unknown") or not v.get("step_ms"):
        return f"verdict: {v.get('summary') or 'no steps measured'}"
    parts = _head(v, Verdict.from_dict(v))
    if parts is None:
        return f"verdict: {plain_words(v)}"
    return fit(("verdict: ", 0), *parts)


def headline(v: Mapping[str, Any]) -> str:
    """The verdict's short line without "verdict: ", for a chart's or a page's title and the live status."""
    return verdict_short(v).removeprefix("verdict: ")


def preface(plain: str, interference: Mapping[str, Any] | None) -> str:
    """A stage's summary as printed: its plain words after the interference sentence when that is material."""
    if not isinstance(interference, Mapping) or not interference.get("material") or not plain:
        return plain
    return f"{interference_sentence(interference)}. {plain[0].upper()}{plain[1:]}"


def stored_words(v: Mapping[str, Any]) -> str:
    """The words a verdict document stored beside its facts (what an older or damaged one still says)."""
    return str(v.get("summary") or v.get("plain_summary") or "") if isinstance(v, Mapping) else ""


def plain_words(v: Mapping[str, Any]) -> str:
    """The verdict at length, without what inflated the steps (what a quiet machine would read first):
    the decision, outlier steps set apart, start-up where it dominates, the rank it was judged on,
    diagnose's checks and what loading is. A document without the facts: its stored words."""
    try:
        return _plain_words(v)
    except MALFORMED:
        return str(v.get("plain_summary") or "") or stored_words(v)


def summary_words(v: Mapping[str, Any]) -> str:
    """The verdict as --explain and the HTML's why panel say it: spinning threads and a material
    interference finding first (what inflated the steps), then plain_words."""
    try:
        return _summary_words(v)
    except MALFORMED:
        return stored_words(v)


def verdict_short(v: Mapping[str, Any]) -> str:
    """The verdict in one line of at most WIDTH characters: the bound and its level, what the time is, its
    ms and share of the step (with the interval, where it fits), and a mark when a measured busy machine
    makes it uncertain."""
    try:
        return _verdict_short(v)
    except MALFORMED:
        return f"verdict: {stored_words(v)}"


def cause_words(v: Mapping[str, Any], c: Mapping[str, Any]) -> tuple[str, str]:
    """A named cause's (what, evidence) in words: from the verdict's facts, else the words it stored."""
    try:
        return _cause_words(v, c)
    except MALFORMED:
        return str(c.get("what") or c.get("label") or ""), str(c.get("evidence") or "")
