"""The one verdict: which avoidable cause, if any, costs a step enough to be named. A pure function of a
few numbers (avoidable ms per label and the step's ms), so every command, a live status line and a
partial run all reach the same decision on the same evidence. It decides; report.words.verdict says it.

Compute is the healthy state. What a user can remove is the rest of the step: the exposed wait for
data (load not hidden by workers), exposed copies, exposed collectives and host gaps. Each label's
exposed time (the attribution's own definition) is exactly what would leave the step if that
cause were removed, so it is also the expected gain.
"""

import dataclasses
from typing import Any, Mapping

from perfcore.analysis.codec import BadDocument, from_doc
from perfcore.analysis.gain import expected_gain
from perfcore.analysis.interference import valid_finding
from perfcore.analysis.results import BOUNDS, UNDECIDED, Cause, Gain, Interference, Level, Startup, Verdict
from perfcore.analysis.uncertainty import valid_robust

__all__ = [
    "AVOIDABLE",
    "WARN_SHARE",
    "CRITICAL_SHARE",
    "STARTUP_DOMINATES",
    "NEAR_TIER",
    "avoidable",
    "Evidence",
    "decide",
    "decide_run",
    "judge",
    "judge_causes",
    "run_evidence",
    "report_evidence",
    "steady_ms",
    "startup_share",
    "interference_of",
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


def avoidable(breakdown_ms: Mapping[str, float]) -> dict[str, float]:
    """The avoidable ms per step of each non-compute label of an attribution breakdown."""
    return {lb: float(breakdown_ms.get(lb) or 0.0) for lb in AVOIDABLE}


def _level(share: float) -> str:
    return "critical" if share >= CRITICAL_SHARE else "warn" if share >= WARN_SHARE else "minor"


# A share this close to a tier (a share of the tier itself: 8.5-11.5% at 10%, 17-23% at 20%) is near its
# line: two runs of the same loop land on either side of it by noise alone (9.5% once, 10% the next), so
# near the line a run is said the same way whichever side its estimate fell on, as is one whose interval
# straddles the tier.
NEAR_TIER = 0.15


def _near_tier(share: float, band: tuple[float, float] | None) -> float | None:
    """The tier a measured share is near (its interval straddles it, or the estimate is within NEAR_TIER of
    it); None without an interval: a figure with no per-step spread is held to the tiers as they are."""
    if not band:
        return None
    # The lower tier first: a share near both is near the first (is it a cause at all?).
    for tier in (WARN_SHARE, CRITICAL_SHARE):
        if band[0] < tier <= band[1] or abs(share - tier) <= NEAR_TIER * tier:
            return tier
    return None


def startup_share(startup: Mapping[str, Any] | None, step_ms: float, steps: int) -> Startup | None:
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
    return Startup(
        ms=cost,
        time_to_first_step_ms=ttfs,
        steady_step_ms=steady,
        share_of_run=share,
        dominates=share >= STARTUP_DOMINATES,
        steps=max(int(steps), 0),
        first_step_ms=float(first) if isinstance(first, (int, float)) and first else None,
    )


def interference_of(f: Mapping[str, Any] | None) -> Interference | None:
    """An interference finding (analysis.interference's figures) typed; None when there is none or it is damaged."""
    try:
        return from_doc(Interference, dict(f), "interference") if f else None
    except BadDocument:
        return None


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
        # The level the interval's low end surely reaches: a borderline cause never flips up a tier; near a
        # tier's line, the level below it whichever side the estimate fell on.
        level = _level(band[0]) if band else _level(share)
        tier = _near_tier(share, band)
        if tier == WARN_SHARE:
            level = "borderline"
        elif tier == CRITICAL_SHARE:
            level = "warn"
        ranked.append(
            Cause(
                label=lb,
                bound=BOUNDS[lb],
                ms_per_step=ms,
                share=share,
                level=Level(level),
                gain=Gain(**g),
                share_band=band,
                borderline_tier=tier,
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


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What a verdict is judged on: the avoidable ms a step of each cause and the step's ms (> 0), with the
    facts beside them. measured_by: a code per label where an experiment replaced the attribution's figure
    ("synthetic": diagnose's experiment A). interference: a finding of analysis.interference; when material
    the verdict is `uncertain` and keeps it. forward_only: the loop has no backward or optimizer (health), so
    its gain is larger than a training step's."""

    avoidable_ms: Mapping[str, float]
    step_ms: float
    on_gpu: bool = False
    measured_by: Mapping[str, str] | None = None
    compute_ms: float | None = None
    startup: Mapping[str, Any] | None = None
    steps: int = 0
    share_band: Mapping[str, tuple[float, float]] | None = None
    interference: Mapping[str, Any] | None = None
    outliers: Mapping[str, Any] | None = None
    forward_only: bool = False


def judge(ev: Evidence) -> Verdict:
    """The typed verdict: judge_causes' decision with the facts its words need beside it."""
    interference = ev.interference
    v = judge_causes(
        ev.avoidable_ms,
        ev.step_ms,
        compute_ms=ev.compute_ms,
        share_band=ev.share_band,
        uncertain=bool(interference and interference.get("material")),
    )
    return dataclasses.replace(
        v,
        on_gpu=bool(ev.on_gpu),
        steps=max(int(ev.steps or 0), 0),
        measured_by=dict(ev.measured_by or {}),
        forward_only=bool(ev.forward_only),
        startup=startup_share(ev.startup, v.step_ms, ev.steps),
        interference=interference_of(interference) if v.uncertain and interference else None,
        outliers=int((ev.outliers or {}).get("count") or 0),
        thresholds=(WARN_SHARE, CRITICAL_SHARE),
    )


def decide(avoidable_ms: Mapping[str, float], step_ms: float, **evidence: Any) -> Verdict:
    """The verdict (numbers and statuses, no words; report.words.verdict says it), from the avoidable ms per
    step of each cause (load, transfer, comm, host) and the step's ms; the undecided verdict when nothing was
    measured (step_ms <= 0). The evidence is Evidence's other fields (on_gpu, share_band, interference, startup, ...).

    share_band: each label's interval of shares (from the per-step samples). A cause whose interval
    straddles a tier is "borderline" there: the verdict names the tier its low end surely reaches
    instead of flipping from run to run."""
    if not float(step_ms or 0.0) > 0:  # nothing measured yet (a live view before the first step, warm-up only)
        return UNDECIDED
    return judge(Evidence(avoidable_ms, float(step_ms), **evidence))


def decide_run(doc: Mapping[str, Any], *, forward_only: bool = False) -> Verdict:
    """decide() on a run's facts (or any mapping with step_time_ms.mean and breakdown_ms).
    With the document's robust breakdown (breakdown_robust), the verdict is judged on its trimmed
    estimate and intervals, and keeps its interference finding when that is material."""
    return decide(**run_evidence(doc), forward_only=forward_only)


def run_evidence(doc: Mapping[str, Any]) -> dict[str, Any]:
    """decide()'s arguments from a run's facts (a part, or run.json's): the numbers a verdict on it is judged on."""
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
    )


def report_evidence(r: Any) -> dict[str, Any]:
    """run_evidence() of a typed run (analysis.run_report.RunReport): the same numbers, from its parts."""
    from perfcore.analysis.codec import to_doc

    return run_evidence(
        {
            "step_time_ms": {"mean": r.step_time_ms.mean},
            "breakdown_ms": r.breakdown_ms.as_dict(),
            "breakdown_robust": to_doc(r.breakdown_robust),
            "device": r.device,
            "startup": to_doc(r.startup),
            "steps": r.steps,
            "interference": to_doc(r.interference),
        }
    )


def steady_ms(evidence: Mapping[str, Any]) -> dict[str, float]:
    """Every label's ms a step as run_evidence() gives them to the verdict (the steady estimate where
    outlier steps were set apart): what the table and a try line quote beside the verdict."""
    return {**evidence["avoidable_ms"], "compute": float(evidence["compute_ms"] or 0.0)}
