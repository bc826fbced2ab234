"""The one verdict: which avoidable cause, if any, costs a step enough to be named. A pure function of a
few numbers (avoidable ms per label and the step's ms), so every command, a live status line and a
partial run all reach the same decision on the same evidence. It decides; report.words.verdict says it.

Compute is the healthy state. What a user can remove is the rest of the step: the exposed wait for
data (load not hidden by workers), exposed copies, exposed collectives and host gaps. Each label's
exposed time (the attribution's own definition) is exactly what would leave the step if that
cause were removed, so it is also the expected gain.
"""

import dataclasses
import math
from typing import Any, Mapping

from perfcore.analysis.checks import Prediction
from perfcore.analysis.codec import BadDocument, Count, Num, fields_of, from_doc
from perfcore.analysis.gain import expected_gain
from perfcore.analysis.results import BOUNDS, UNDECIDED, Cause, Gain, Interference, Level, Startup, Verdict
from perfcore.analysis.run_parts import Robust, StartupFacts

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
    "evidence_of",
    "run_evidence",
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


def startup_share(startup: StartupFacts | None, step_ms: float, steps: int) -> Startup | None:
    """Start-up's share of the whole run. time_to_first_step_ms runs from launch to the end of the first
    step, so what start-up costs is that less one steady step, against the run (that plus the
    measured steps). None when the run did not record it."""
    if startup is None:
        return None
    ttfs = startup.time_to_first_step_ms
    steady = startup.steady_step_ms or step_ms or 0.0
    cost = max(0.0, ttfs - steady)
    run_ms = ttfs + max(steps, 0) * steady
    share = cost / run_ms if run_ms > 0 else 0.0
    return Startup(
        ms=cost,
        time_to_first_step_ms=ttfs,
        steady_step_ms=steady,
        share_of_run=share,
        dominates=share >= STARTUP_DOMINATES,
        steps=max(int(steps), 0),
        first_step_ms=startup.first_step_ms or None,
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
    ("synthetic": diagnose's experiment A). interference: what else used the machine; when material the
    verdict is `uncertain` and keeps it. outliers: the steps the trimmed breakdown set apart. forward_only:
    the loop has no backward or optimizer (health), so its gain is larger than a training step's."""

    avoidable_ms: Mapping[str, float]
    step_ms: float
    on_gpu: bool = False
    measured_by: Mapping[str, str] | None = None
    compute_ms: float | None = None
    startup: StartupFacts | None = None
    steps: int = 0
    share_band: Mapping[str, tuple[float, float]] | None = None
    interference: Interference | None = None
    outliers: int = 0
    forward_only: bool = False
    step_sem_ms: float | None = None  # the standard error of step_ms, in the same statistic

    @property
    def label_ms(self) -> dict[str, float]:
        """Every label's ms a step as the verdict is judged on them (the steady estimate where outlier steps
        were set apart): what the table and a try line quote beside the verdict."""
        return {**self.avoidable_ms, "compute": float(self.compute_ms or 0.0)}

    def prediction(self, label: str) -> Prediction:
        """What removing `label`'s cause saves by this evidence (ms, with its interval), without deciding it:
        what checks.reconcile holds an experiment that removes it to."""
        step, band = self.step_ms, (self.share_band or {}).get(label)
        return Prediction(label, step, self.avoidable_ms[label], (band[0] * step, band[1] * step) if band else None)


def judge(ev: Evidence) -> Verdict:
    """The verdict (numbers and statuses, no words; report.words.verdict says it) on its evidence: judge_causes'
    decision with the facts its words need beside it; the undecided verdict when nothing was measured
    (step_ms <= 0: a live view before the first step, warm-up only)."""
    if not 0 < ev.step_ms < math.inf:  # nothing measured, or no finite step to judge on
        return UNDECIDED
    intf = ev.interference
    v = judge_causes(
        ev.avoidable_ms,
        ev.step_ms,
        compute_ms=ev.compute_ms,
        share_band=ev.share_band,
        uncertain=bool(intf and intf.material),
    )
    return dataclasses.replace(
        v,
        on_gpu=bool(ev.on_gpu),
        steps=max(int(ev.steps or 0), 0),
        measured_by=dict(ev.measured_by or {}),
        forward_only=bool(ev.forward_only),
        startup=startup_share(ev.startup, v.step_ms, ev.steps),
        interference=intf if v.uncertain else None,
        outliers=ev.outliers,
        thresholds=(WARN_SHARE, CRITICAL_SHARE),
    )


def decide(avoidable_ms: Mapping[str, float], step_ms: float, **evidence: Any) -> Verdict:
    """judge() on evidence given by hand: the avoidable ms per step of each cause (load, transfer, comm, host),
    the step's ms and Evidence's other fields (on_gpu, share_band, interference, startup, ...).

    share_band: each label's interval of shares (from the per-step samples). A cause whose interval
    straddles a tier is "borderline" there: the verdict names the tier its low end surely reaches
    instead of flipping from run to run."""
    return judge(Evidence(avoidable_ms, float(step_ms or 0.0), **evidence))


def evidence_of(
    step_ms: float,
    breakdown_ms: Mapping[str, float],
    *,
    robust: Robust | None = None,
    device: str = "cpu",
    steps: int = 0,
    startup: StartupFacts | None = None,
    interference: Interference | None = None,
    step_sem_ms: float | None = None,
) -> Evidence:
    """A run's evidence from its typed parts: its mean step and breakdown, or, with its robust breakdown, the
    trimmed estimate with its intervals and the outlier steps it set apart."""
    if robust is not None and not (
        0 < robust.step_ms < math.inf
        and set(robust.share_band) <= set(robust.share)
        and (not steps or robust.steps == steps)
    ):
        # Damaged, or computed over other rows than the run's figures (evaluation rows taken out after it):
        # it describes another set of steps, so the verdict keeps to the run's own.
        robust = None
    bd = {**breakdown_ms, **robust.ms} if robust else dict(breakdown_ms)
    return Evidence(
        avoidable_ms=avoidable(bd),
        step_ms=robust.step_ms if robust else step_ms,
        on_gpu=device != "cpu",
        compute_ms=bd.get("compute"),
        startup=startup,
        steps=steps,
        share_band=robust.share_band if robust else None,
        outliers=robust.outliers.count if robust and robust.outliers else 0,
        interference=interference,
        step_sem_ms=robust.step_sem_ms if robust else step_sem_ms,
    )


@dataclasses.dataclass(frozen=True)
class _Mean:
    mean: Num


@dataclasses.dataclass(frozen=True)
class _RunFacts:
    """The facts a verdict reads from a run's document (a part, run.json's, an older one's), each on its own: a
    missing or damaged one is absent (a document is data: a hand-edited or fuzzed value never reaches the
    verdict as anything else)."""

    step_time_ms: _Mean | Num | None = None
    step_ms: Num | None = None
    breakdown_ms: dict[str, Num] = dataclasses.field(default_factory=dict)
    breakdown_robust: Robust | None = None
    device: str = "cpu"
    steps: Count = 0
    startup: StartupFacts | None = None
    interference: Interference | None = None


def run_evidence(doc: Mapping[str, Any]) -> Evidence:
    """The evidence of a run held as a document not yet typed (a part, run.json's, an older one's): read once
    into the typed parts, then evidence_of() as a typed run gives it."""
    f = _RunFacts(**fields_of(_RunFacts, doc))
    st = f.step_time_ms
    return evidence_of(
        st.mean if isinstance(st, _Mean) else float(st or f.step_ms or 0.0),
        f.breakdown_ms,
        robust=f.breakdown_robust,
        device=f.device,
        steps=f.steps,
        startup=f.startup,
        interference=f.interference,
    )


def decide_run(doc: Mapping[str, Any], *, forward_only: bool = False) -> Verdict:
    """The verdict on a run's document (run_evidence): with its robust breakdown, judged on the trimmed
    estimate and intervals, keeping its interference finding when that is material."""
    return judge(dataclasses.replace(run_evidence(doc), forward_only=forward_only))
