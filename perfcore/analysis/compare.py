"""Two runs side by side: per-label and per-kernel-category change, the speedup with its status against
both runs' noise, and whether the verdict or its primary cause changed (each run's verdict decided again on
its own figures by verdict.judge, so runs from older versions compare on the same rule). Facts only:
report/words/verdict says them."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.checks import difference_noise_ms
from perfcore.analysis.codec import to_doc
from perfcore.analysis.results import Verdict
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.status import Change, change_of
from perfcore.analysis.verdict import judge

__all__ = ["compare_runs", "Comparison", "Side", "Delta"]


@dataclasses.dataclass(frozen=True)
class Side:
    """One run as compare keeps it: its steady step (the mean, outlier steps set apart where some were), that
    mean's standard error, the device and its verdict."""

    step_ms: float
    step_sem_ms: float | None
    device: str | None
    verdict: Verdict

    @property
    def named(self) -> str | None:
        """What the verdict names (its first cause's bound), None when it names none."""
        return self.verdict.named[0].bound if self.verdict.named else None


@dataclasses.dataclass(frozen=True)
class Delta:
    a_ms: float
    b_ms: float
    delta_ms: float


# Points of change between the steady step and the plain means past which the outlier steps moved on their own.
OUTLIER_GAP_PCT = 5.0


@dataclasses.dataclass(frozen=True)
class Comparison:
    """A's and B's figures and verdicts, `change` (B's speed against A's: faster, slower or within noise, with
    noise_ms from both runs' spread where they report one), the change per label and per kernel category.
    step_time_change_pct is the steady step's change (what the reports quote); mean_change_pct the plain
    means', which also holds the outlier steps the steady step sets apart."""

    a: Side
    b: Side
    speedup: float
    change: Change | None
    noise_ms: float | None
    step_time_change_pct: float
    labels: dict[str, Delta]
    kernel_categories: dict[str, Delta]
    mean_change_pct: float = 0.0
    schema: str = "perfcore.compare/2"

    @property
    def outliers_moved(self) -> bool:
        """The plain means moved OUTLIER_GAP_PCT points more or less than the steady step: the outlier steps
        it sets apart changed on their own (a NaN change is not said to)."""
        return abs(self.mean_change_pct - self.step_time_change_pct) >= OUTLIER_GAP_PCT

    @property
    def regression_pct(self) -> float:
        """How much slower B is by the worse of the two statistics: a CI gate trips on a slowdown in the
        steady steps and on one held in the few steps set apart as outliers alike."""
        steady, mean = self.step_time_change_pct, self.mean_change_pct
        return max(steady, mean) if not (math.isnan(steady) or math.isnan(mean)) else math.nan

    @property
    def primary_changed(self) -> bool:
        return self.a.verdict.primary != self.b.verdict.primary

    @property
    def verdict_changed(self) -> bool:
        """The primary cause changed, or only its tier (level)."""
        return self.primary_changed or self.a.verdict.level is not self.b.verdict.level

    def to_dict(self) -> dict[str, Any]:
        return to_doc(self)


def _side(r: RunReport) -> tuple[Side, dict[str, float]]:
    """One run's side and its labels' ms a step, in the statistic its own report quotes: the steady step
    (outlier steps set apart where some were), so that compare's A and B read as each run's header did."""
    ev = r.evidence()
    return Side(ev.step_ms, ev.step_sem_ms, r.device, judge(ev)), ev.label_ms


def compare_runs(a: RunReport, b: RunReport) -> Comparison:
    """A against B: speedup (A's steady step over B's), its status against both runs' noise, each label's and
    each kernel category's change, and each run's verdict."""
    (sa, ma), (sb, mb) = _side(a), _side(b)
    ta, tb = sa.step_ms, sb.step_ms
    labels = {lb: Delta(ma[lb], mb[lb], mb[lb] - ma[lb]) for lb in LABELS}
    cats = {}
    ca, cb = a.kernel_categories, b.kernel_categories
    for c in dict.fromkeys(list(ca) + list(cb)):
        x = (ca[c].ms or 0.0) if c in ca else 0.0
        y = (cb[c].ms or 0.0) if c in cb else 0.0
        cats[c] = Delta(x, y, y - x)
    speedup = ta / tb if tb else float("inf")
    noise = difference_noise_ms(sa.step_sem_ms, sb.step_sem_ms)
    change = change_of(speedup, noise / ta if noise is not None and ta else None) if tb and ta else None
    return Comparison(
        a=sa,
        b=sb,
        speedup=speedup,
        change=change,
        noise_ms=noise,
        step_time_change_pct=_change_pct(ta, tb),
        labels=labels,
        kernel_categories=cats,
        mean_change_pct=_change_pct(a.step_time_ms.mean, b.step_time_ms.mean),
    )


def _change_pct(a_ms: float, b_ms: float) -> float:
    return 100 * (b_ms - a_ms) / a_ms if a_ms else 0.0
