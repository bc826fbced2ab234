"""The one verdict: which avoidable cause, if any, costs a step enough to be named. A pure function of a
few numbers (avoidable ms per label and the step's ms), so every command, a live status line and a
partial run all reach the same words on the same evidence.

Compute is the healthy state. What a user can remove is the rest of the step: the exposed wait for
data (load not hidden by workers), exposed copies, exposed collectives and host gaps. Each label's
exposed time (the attribution's own definition) is exactly what would leave the step if that
cause were removed, so it is also the expected gain.
"""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.gain import expected_gain
from perfcore.analysis.interference import valid_finding
from perfcore.analysis.results import BOUNDS, Cause, Gain, Level, Verdict
from perfcore.analysis.uncertainty import LEVEL, steps_to_settle, valid_robust
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_share, fmt_x

__all__ = [
    "preface",
    "AVOIDABLE",
    "WARN_SHARE",
    "CRITICAL_SHARE",
    "STARTUP_DOMINATES",
    "THRESHOLDS_RATIONALE",
    "avoidable",
    "decide",
    "decide_run",
    "judge_causes",
    "run_evidence",
    "steady_ms",
    "what_of",
    "startup_share",
    "undecided",
]

AVOIDABLE = ("load", "transfer", "comm", "host")

# One place for the tiers. A cause is named when it costs >= 10% of the step (warn) and called
# critical at >= 20%; below 10% everywhere the run is healthy and compute-bound. This is the
# seed method's stage-1 rule (>= 60% busy is healthy, i.e. up to ~40% may be spread over several
# small causes) made per cause, and it sits where the published tools put theirs: XProf calls a
# step "moderately input-bound" from 5% and "highly" from 20%; TraceML warns at 10% and is
# critical at 20%. 10% rather than XProf's 5% because a 5% share is within this tool's run-to-run
# spread on a busy host (and a 1.05x gain is rarely worth a change to the loop).
WARN_SHARE = 0.10
CRITICAL_SHARE = 0.20
# Start-up (time to the first step plus the first step's excess) enters the verdict when it is at
# least half of the whole run: then a short run measures mostly its own start.
STARTUP_DOMINATES = 0.50
THRESHOLDS_RATIONALE = (
    "a cause is named at >= 10% of the step (warn), critical at >= 20%; otherwise healthy, "
    "compute-bound (seed stage 1: >= 60% busy is healthy; XProf input-bound 5%/20%; "
    "TraceML 10%/20%)"
)

# bound name, what the time is, how the attribution measured it (GPU, no GPU)
_CAUSES = {
    "load": (
        "input-bound",
        "waiting for data",
        "the host waits in the DataLoader's next() while no GPU work runs",
        "the loop waits in the DataLoader's next()",
    ),
    "transfer": (
        "transfer-bound",
        "host-to-device copies not hidden by compute",
        "copy time with no kernel running",
        "time in the copy phase",
    ),
    "comm": (
        "communication-bound",
        "collective communication not hidden by compute",
        "collective kernels with no compute kernel running",
        "time inside collectives",
    ),
    "host": (
        "host-bound",
        "host gaps (the GPU idles while Python, launches or syncs run)",
        "step time no kernel, copy or data wait covers",
        "step time outside loading, copies and the model's forward/backward/optimizer",
    ),
}
# Without a GPU, host is everything outside the timed phases: tensor math the loop runs outside
# modules (a functional loss, zero_grad, a manual parameter update, metrics) lands there beside
# Python and logging, and the hooks cannot tell them apart, so the words say both.
CPU_HOST = (
    "time outside the model's modules, backward and optimizer (on a CPU this holds tensor math run "
    "outside modules, such as a functional loss, zero_grad or a manual parameter update, as well as "
    "Python and logging)"
)


def what_of(label: str) -> str:
    """What an avoidable label's time is, in words (a check says what its experiment removed)."""
    return _CAUSES[label][1]


def avoidable(breakdown_ms: Mapping[str, float]) -> dict[str, float]:
    """The avoidable ms per step of each non-compute label of an attribution breakdown."""
    return {lb: float(breakdown_ms.get(lb) or 0.0) for lb in AVOIDABLE}


def _level(share: float) -> str:
    return "critical" if share >= CRITICAL_SHARE else "warn" if share >= WARN_SHARE else "minor"


def _straddles(band: tuple[float, float] | None) -> float | None:
    """The tier an interval of shares straddles (its low end below, its high end at or above), if any."""
    if not band:
        return None
    # The lower tier first: an interval across both is borderline at the first (is it a cause at all?).
    for tier in (WARN_SHARE, CRITICAL_SHARE):
        if band[0] < tier <= band[1]:
            return tier
    return None


def startup_share(startup: Mapping[str, Any] | None, step_ms: float, steps: int) -> dict[str, Any] | None:
    """Start-up's share of the whole run. time_to_first_step_ms runs from launch to the end of the first
    step, so what start-up costs is that less one steady step, against the run (that plus the
    measured steps). None when the run did not record it."""
    if not startup or startup.get("time_to_first_step_ms") is None:
        return None
    ttfs = float(startup["time_to_first_step_ms"] or 0.0)
    steady = float(startup.get("steady_step_ms") or step_ms or 0.0)
    cost = max(0.0, ttfs - steady)
    run_ms = ttfs + max(steps, 0) * steady
    share = cost / run_ms if run_ms > 0 else 0.0
    first = startup.get("first_step_ms")
    return {
        "ms": cost,
        "time_to_first_step_ms": ttfs,
        "share_of_run": share,
        "dominates": share >= STARTUP_DOMINATES,
        "sentence": (
            f"{fmt_ms(ttfs)} from launch to the end of the first step"
            + (f" (which took {fmt_ms(first)}; a steady one {fmt_ms(steady)})" if first else "")
            + f" is {fmt_share(share)} of this run"
            + (f" of {steps} steps; a longer run dilutes it" if steps else "")
        ),
    }


def _settle(steps: int, share: float, band, tier: float) -> str:
    more = steps_to_settle(steps, share, band, tier) if steps else None
    if more and more > steps:
        return f"about {more} steps (--steps {more}) or a quieter machine would settle it"
    return "more steps or a quieter machine would settle it"


def _thresholds() -> dict[str, Any]:
    return {"warn": WARN_SHARE, "critical": CRITICAL_SHARE, "rationale": THRESHOLDS_RATIONALE}


def undecided() -> dict[str, Any]:
    """The verdict of a document no step has been judged in yet (nothing measured, or its decision is
    left to a caller with more evidence)."""
    return {
        "bound": "unknown",
        "level": "unknown",
        "healthy": None,
        "primary": None,
        "causes": [],
        "avoidable_ms": {},
        "step_ms": 0.0,
        "summary": "no steps measured",
        "thresholds": _thresholds(),
    }


def judge_causes(
    avoidable_ms: Mapping[str, float],
    step_ms: float,
    *,
    compute_ms: float | None = None,
    share_band: Mapping[str, tuple[float, float]] | None = None,
    uncertain: bool = False,
) -> Verdict:
    """The decision in numbers and statuses: each avoidable cause's ms per step, share and level (the
    level its interval's low end surely reaches; borderline when the interval straddles the warn
    tier), ranked by ms per step; the bound is the largest cause that surely reaches a tier, else a
    borderline one, else compute (healthy). step_ms must be > 0."""
    step = float(step_ms)
    ranked = []
    for lb in AVOIDABLE:
        ms = max(0.0, float(avoidable_ms.get(lb) or 0.0))
        share = ms / step
        band = tuple(share_band[lb]) if share_band and share_band.get(lb) is not None else None
        g = expected_gain(step, ms, saved_band_ms=(band[0] * step, band[1] * step) if band else None)
        # The level the interval's low end surely reaches: a borderline cause never flips up a tier.
        level = _level(band[0]) if band else _level(share)
        tier = _straddles(band)
        if tier == WARN_SHARE:
            level = "borderline"
        ranked.append(
            Cause(
                label=lb,
                bound=BOUNDS[lb],
                ms_per_step=ms,
                share=share,
                level=Level(level),
                gain=Gain(g["saved_ms"], g["step_after_ms"], g["speedup"], g["band"]),
                share_band=band,
                borderline_tier=tier if band else None,
            )
        )
    ranked.sort(key=lambda c: -c.ms_per_step)
    named = [c for c in ranked if c.level is not Level.MINOR]
    sure = [c for c in named if c.level is not Level.BORDERLINE]
    comp = compute_ms if compute_ms is not None else max(step - sum(c.ms_per_step for c in ranked), 0.0)
    if sure:
        bound, level, healthy, primary = sure[0].label, sure[0].level, False, sure[0].label
    elif named:
        bound, level, healthy, primary = named[0].label, Level.BORDERLINE, None, named[0].label
    else:
        bound, level, healthy, primary = "compute", Level.HEALTHY, True, None
    return Verdict(
        bound=bound,
        level=level,
        healthy=healthy,
        primary=primary,
        step_ms=step,
        compute_ms=comp,
        ranked=tuple(ranked),
        uncertain=uncertain,
    )


def decide(  # noqa: PLR0913
    avoidable_ms: Mapping[str, float],
    step_ms: float,
    *,
    on_gpu: bool = False,
    measured_by: Mapping[str, str] | None = None,
    compute_ms: float | None = None,
    startup: Mapping[str, Any] | None = None,
    steps: int = 0,
    share_band: Mapping[str, tuple[float, float]] | None = None,
    interference: Mapping[str, Any] | None = None,
    outliers: Mapping[str, Any] | None = None,
    gain_of: str = "steps",
    host_contains: str | None = None,
) -> dict[str, Any]:
    """The verdict from the avoidable ms per step of each cause (load, transfer, comm, host) and the
    step's ms. Returns {bound, level, healthy, primary, causes (ranked, each with ms_per_step, share,
    level, evidence, expected_speedup), summary, thresholds[, startup]}. `measured_by` replaces the
    default "how measured" of a label (diagnose passes its A/B measurement).

    share_band: each label's interval of shares (from the per-step samples). A cause whose interval
    straddles a tier is "borderline" there: the verdict names the tier its low end surely reaches, and
    says what would settle it, instead of flipping from run to run. interference: a finding of
    analysis.interference; when material, the summary says so first and the verdict is `uncertain`.
    gain_of: what the expected gain is of ("steps"; health's forward-only loop names itself).
    host_contains: what the host label holds, in words, where it is more than Python (CPU runs)."""
    step = float(step_ms or 0.0)
    thresholds = _thresholds()
    if not step > 0:  # nothing measured yet (a live view before the first step, a warm-up-only run)
        return undecided()
    v = judge_causes(
        avoidable_ms,
        step,
        compute_ms=compute_ms,
        share_band=share_band,
        uncertain=bool(interference and interference.get("material")),
    )
    causes = []
    for cause in v.ranked:
        lb, ms, share, band = cause.label, cause.ms_per_step, cause.share, cause.share_band
        _, what, how_gpu, how_cpu = _CAUSES[lb]
        if lb == "host" and not on_gpu:
            what = host_contains or CPU_HOST
        how = (measured_by or {}).get(lb) or (how_gpu if on_gpu else how_cpu)
        gain = expected_gain(step, ms, saved_band_ms=(band[0] * step, band[1] * step) if band else None)
        bnd = f", {100 * LEVEL:.0f}% interval {fmt_band(band[0], band[1], fmt_share)}" if band else ""
        evidence = f"{fmt_ms(ms)} of a {fmt_ms(step)} step ({fmt_share(share)}{bnd}), measured as {how}"
        causes.append({**cause.to_dict(), "what": what, "expected_gain": gain, "evidence": evidence})
    named = [c for c in causes if c["level"] != "minor"]
    comp = v.compute_ms
    doc: dict[str, Any] = {**v.to_dict(), "causes": named, "thresholds": thresholds}
    sure = [c for c in named if c["level"] != "borderline"]
    if sure:
        top = sure[0]
        g = top["expected_gain"]
        speed = f"; removing it would make {gain_of} {g['text']}" if g["text"] else ""
        tier = CRITICAL_SHARE if top["level"] == "critical" else WARN_SHARE
        band = top.get("share_band")
        pct = fmt_share(top["share"]) + (
            f", {100 * LEVEL:.0f}% interval {fmt_band(band[0], band[1], fmt_share)}" if band else ""
        )
        summary = (
            f"{top['bound']}: {top['what']} costs {fmt_ms(top['ms_per_step'])} of each {fmt_ms(step)} step "
            f"({pct}; {top['level']} at >= {100 * tier:.0f}%){speed}"
        )
        if top.get("borderline_tier") == CRITICAL_SHARE:
            summary += f". Borderline critical: the interval straddles {100 * CRITICAL_SHARE:.0f}%; " + _settle(
                steps, top["share"], band, CRITICAL_SHARE
            )
        others = [c for c in named if c is not top]
        if others:
            summary += ". Also " + ", ".join(
                f"{c['what'].split(' (')[0]} {fmt_ms(c['ms_per_step'])} ({fmt_share(c['share'])}, {c['level']})"
                for c in others
            )
    elif named:
        top = named[0]
        band = top["share_band"]
        summary = (
            f"borderline {top['bound']}: {top['what']} costs {fmt_ms(top['ms_per_step'])} of each "
            f"{fmt_ms(step)} step ({fmt_share(top['share'])}, {100 * LEVEL:.0f}% interval "
            f"{fmt_band(band[0], band[1], fmt_share)}), which straddles the {100 * WARN_SHARE:.0f}% tier: "
            + _settle(steps, top["share"], band, WARN_SHARE)
        )
    else:
        big = causes[0] if causes else None
        summary = (
            f"compute-bound (healthy): compute is {fmt_share(comp / step if step else 0)} of each "
            f"{fmt_ms(step)} step; no avoidable cause reaches {100 * WARN_SHARE:.0f}%"
        )
        if big and big["ms_per_step"] > 0:
            summary += (
                f" (largest: {big['what'].split(' (')[0]} {fmt_ms(big['ms_per_step'])}, {fmt_share(big['share'])})"
            )
    if outliers and outliers.get("count"):
        doc["outliers"] = dict(outliers)
        summary += f" ({outliers['count']} outlier step(s) set apart)"
    su = startup_share(startup, step, steps)
    if su:
        doc["startup"] = su
        if su["dominates"]:
            summary += f". Start-up dominates: {su['sentence']}"
    # The verdict in words without the interference preface: what a quiet machine would read first.
    doc["plain_summary"] = summary
    if v.uncertain:
        doc["interference"] = dict(interference)
    doc["summary"] = preface(summary, doc.get("interference"))
    return doc


def preface(plain: str, interference: Mapping[str, Any] | None) -> str:
    """The summary as printed: the plain verdict, after the interference sentence when that is
    material. Whoever edits a verdict's words edits plain_summary and makes summary with this."""
    if not interference or not interference.get("material") or not plain:
        return plain
    return f"{interference['sentence']}. {plain[0].upper()}{plain[1:]}"


def decide_run(
    doc: Mapping[str, Any], *, measured_by: Mapping[str, str] | None = None, gain_of: str = "steps"
) -> dict[str, Any]:
    """decide() on a perfcore.run/1 document (or any mapping with step_time_ms.mean and breakdown_ms).
    With the document's robust breakdown (breakdown_robust), the verdict is judged on its trimmed
    estimate and intervals; its interference finding, when material, comes first."""
    return decide(**run_evidence(doc), measured_by=measured_by, gain_of=gain_of)


def run_evidence(doc: Mapping[str, Any]) -> dict[str, Any]:
    """decide()'s arguments from a perfcore.run/1 document: the numbers a verdict on it is judged on."""
    st = doc.get("step_time_ms")
    step = st["mean"] if isinstance(st, Mapping) else float(st or doc.get("step_ms") or 0.0)
    bd = doc.get("breakdown_ms") or {}
    rb = valid_robust(doc.get("breakdown_robust"))
    if rb and doc.get("steps") and rb["steps"] != int(doc["steps"]):
        # Computed over other rows than the document's figures (evaluation rows taken out after it):
        # it describes another set of steps, so the verdict keeps to the document's own.
        rb = None
    band = None
    outliers = None
    if rb:
        step = rb["step_ms"]
        bd = {**bd, **rb["ms"]}
        band = rb.get("share_band")
        outliers = rb.get("outliers")
    return dict(
        avoidable_ms=avoidable(bd),
        step_ms=step,
        on_gpu=str(doc.get("device", "cpu")) != "cpu",
        compute_ms=bd.get("compute"),
        startup=doc.get("startup"),
        steps=int(doc.get("steps") or 0),
        share_band=band,
        outliers=outliers,
        interference=valid_finding(doc.get("interference")),
        host_contains=doc.get("host_contains") if isinstance(doc.get("host_contains"), str) else None,
    )


def steady_ms(evidence: Mapping[str, Any]) -> dict[str, float]:
    """Every label's ms a step as run_evidence() gives them to the verdict (the steady estimate where
    outlier steps were set apart): what the table and a try line quote beside the verdict."""
    return {**evidence["avoidable_ms"], "compute": float(evidence["compute_ms"] or 0.0)}
