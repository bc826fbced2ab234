"""The checks of a verdict: does an experiment's measured speed-up (the step without one cause) agree with
what the verdict predicts removing it saves? The prediction's figures, the runs' noise, and the status
(confirmed / partly / not confirmed / inconclusive, with the reason as a status too) with its numbers, as
one typed CheckResult; report.check_words puts it into words. Pure functions."""

from __future__ import annotations

import enum
import statistics
from dataclasses import dataclass, replace
from typing import Any, Mapping

from perfcore.analysis.gain import BAND_Z, expected_gain, judge, measured_gain
from perfcore.analysis.status import Check

__all__ = [
    "COMPUTE_DRIFT",
    "NOISE_SHARE",
    "NOISE_SE",
    "prediction",
    "step_sem_ms",
    "difference_noise_ms",
    "confirm",
    "CheckResult",
    "Reason",
]


def prediction(evidence: Mapping[str, Any]) -> dict[str, Any]:
    """What a verdict on run_evidence() would predict removing each cause saves, without deciding it:
    {step_ms, avoidable_ms, avoidable_band_ms}, the figures confirm() checks an experiment against."""
    step = float(evidence["step_ms"] or 0.0)
    band = evidence.get("share_band") or {}
    return {
        "step_ms": step,
        "avoidable_ms": dict(evidence["avoidable_ms"]),
        "avoidable_band_ms": {lb: [b[0] * step, b[1] * step] for lb, b in band.items() if b is not None},
    }


# Removing a cause never makes compute itself slower: when the experiment's compute per step is this
# much above the baseline's, the machine changed between the runs and the A/B cannot correct anything.
COMPUTE_DRIFT = 1.25
# Two short runs' mean step times differ by a few percent with nothing changed: without a measured
# spread a saving within 5% of the step of the predicted one agrees with it (gain.FALLBACK_STEP);
# with one, the runs' own noise sets the band (a busy host: waits end on scheduler ticks).
NOISE_SHARE = 0.05
NOISE_SE = BAND_Z  # standard errors of the difference of the two runs' mean steps


def step_sem_ms(wall_ms) -> float | None:
    """The standard error of a run's mean step (ms) from its measured steps' times: how far a
    second run of the same loop may land. None below two steps."""
    if len(wall_ms) < 2:
        return None
    return statistics.stdev(float(w) for w in wall_ms) / len(wall_ms) ** 0.5


def difference_noise_ms(*sems: float | None) -> float | None:
    """NOISE_SE standard errors of the difference of independent means, from each run's standard
    error of its mean step (ms); None when a run does not report one."""
    if not sems or any(s is None or s != s for s in sems):
        return None
    return NOISE_SE * sum(float(s) ** 2 for s in sems) ** 0.5


class Reason(str, enum.Enum):
    """Why a check is inconclusive: the values are what diagnose.json carries."""

    NO_MEASUREMENT = "no measurement"  # the experiment gave no step time
    ALL_ONE_LABEL = "all one label"  # the step is all of the cause: removing it leaves no finite step
    NOISE = "noise"  # the runs' noise is as large as the predicted saving
    COMPUTE_DRIFT = "compute drift"  # compute itself changed between the runs: the machine, not the cause


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _pair(v: Any) -> tuple[float | None, float | None] | None:
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return (_num(v[0]), _num(v[1]))
    return None


# A check's figures as diagnose.json carries them: numbers, and (low, high) pairs.
_FIGURES = (
    "step_ms",
    "predicted_speedup",
    "measured_speedup",
    "predicted_ms",
    "measured_saved_ms",
    "measured_ms",
    "measured_noise_ms",
    "others_cores",
)
_PAIRS = ("predicted_band", "measured_band", "agreement_band", "compute_ms")


@dataclass(frozen=True)
class CheckResult:
    """One experiment's measured speedup against the verdict's prediction for removing `label`'s cause:
    the status, the reason when inconclusive, and every figure the words are made from (ms per step).
    predicted_ms / measured_saved_ms: the savings compared (measured signed: negative is slower);
    fallback_band: the agreement band is the usual spread of two runs (no measured noise);
    compute_ms: (baseline, experiment) compute per step, the control; others_cores of cores: what other
    processes used during the busier run, measured (machine_busy: material)."""

    label: str
    experiment: str
    status: Check
    reason: Reason | None = None
    step_ms: float | None = None
    predicted_speedup: float | None = None
    measured_speedup: float | None = None
    predicted_ms: float | None = None
    measured_saved_ms: float | None = None
    measured_ms: float | None = None  # the saving the experiment implies (>= 0), for a corrected verdict
    predicted_band: tuple[float | None, float | None] | None = None
    measured_band: tuple[float | None, float | None] | None = None
    agreement_band: tuple[float | None, float | None] | None = None
    measured_noise_ms: float | None = None
    fallback_band: bool = False
    above_bound: bool = False
    compute_ms: tuple[float | None, float | None] | None = None
    others_cores: float | None = None
    cores: int | None = None
    machine_busy: bool = False

    @property
    def agrees(self) -> bool | None:
        """True confirmed, None inconclusive, False partly / not confirmed."""
        return {Check.CONFIRMED: True, Check.INCONCLUSIVE: None}.get(self.status, False)

    def as_dict(self) -> dict[str, Any]:
        """diagnose.json's check (the keys it has always had, plus the figures behind the words)."""
        d: dict[str, Any] = {"label": self.label, "experiment": self.experiment, "status": self.status.value}
        d["agrees"] = self.agrees
        for k in (*_FIGURES, "cores"):
            d[k] = getattr(self, k)
        for k in _PAIRS:
            v = getattr(self, k)
            d[k] = list(v) if v is not None else None
        d.update(
            reason=self.reason.value if self.reason else None,
            fallback_band=self.fallback_band,
            above_bound=self.above_bound,
            machine_busy=self.machine_busy,
        )
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CheckResult":
        """A check read back from diagnose.json, today's or an older one's ("no measurement" was a status;
        a check from before statuses were kept carries only `agrees`); unknown values read as absent."""
        raw = d.get("status")
        reason = Reason(d["reason"]) if d.get("reason") in {r.value for r in Reason} else None
        if raw == Reason.NO_MEASUREMENT.value:
            status, reason = Check.INCONCLUSIVE, Reason.NO_MEASUREMENT
        elif raw in {c.value for c in Check}:
            status = Check(raw)
        else:
            status = {True: Check.CONFIRMED, False: Check.NOT_CONFIRMED}.get(d.get("agrees"), Check.INCONCLUSIVE)
        cores = d.get("cores")
        return cls(
            label=str(d.get("label") or ""),
            experiment=str(d.get("experiment") or ""),
            status=status,
            reason=reason,
            **{k: _num(d.get(k)) for k in _FIGURES},
            **{k: _pair(d.get(k)) for k in _PAIRS},
            fallback_band=bool(d.get("fallback_band")),
            above_bound=bool(d.get("above_bound")),
            cores=cores if isinstance(cores, int) and not isinstance(cores, bool) else None,
            machine_busy=bool(d.get("machine_busy")),
        )


def confirm(  # noqa: PLR0913
    decision: Mapping[str, Any],
    label: str,
    measured_speedup: float | None,
    experiment: str,
    compute_ms: tuple[float, float] | None = None,
    noise_ms: float | None = None,
    bound: Mapping[str, Any] | None = None,
    compute_may_gain: bool = True,
    busy: Mapping[str, Any] | None = None,
) -> CheckResult:
    """Does a measured A/B speedup (the step without `label`'s cause) agree with the verdict's
    prediction? gain.judge on the two savings in ms: the prediction's band (from the verdict's
    intervals) widened by the runs' noise `noise_ms` (NOISE_SE standard errors of the difference of
    their mean steps). compute_ms: (baseline, experiment) compute per step, the control: inconclusive
    (Reason.COMPUTE_DRIFT) when it drifted up, or down when compute_may_gain is False (nothing the
    experiment removed ran beside compute: loading in the main process on a CPU, or any loading against
    GPU kernels), so only the machine changed. busy: the interference measured during the two runs
    ({others_cores, cores, material}): the check carries it, so a drift is put down to a busy machine
    only when one was measured busy."""
    step = float(decision.get("step_ms") or 0.0)
    ms = float((decision.get("avoidable_ms") or {}).get(label) or 0.0)
    band = (decision.get("avoidable_band_ms") or {}).get(label)
    predicted = expected_gain(step, ms, saved_band_ms=tuple(band) if band else None) if step else None
    measured_busy = bool(busy and busy.get("material"))
    others = busy.get("others_cores") if busy else None
    base = CheckResult(
        label=label,
        experiment=experiment,
        status=Check.INCONCLUSIVE,
        reason=Reason.NO_MEASUREMENT,
        step_ms=step or None,
        predicted_speedup=predicted["speedup"] if predicted else 1.0,
        predicted_ms=predicted["saved_ms"] if predicted else None,
        predicted_band=predicted["band"] if predicted else None,
        compute_ms=tuple(compute_ms) if compute_ms is not None else None,
        others_cores=_num(others),
        cores=busy.get("cores") if busy and isinstance(busy.get("cores"), int) else None,
        machine_busy=measured_busy,
    )
    if not measured_speedup or measured_speedup != measured_speedup or not step:
        return base
    exp_ms = step / measured_speedup
    meas = measured_gain(step, exp_ms, noise_ms=noise_ms)
    figures = {
        "measured_speedup": measured_speedup,
        "measured_saved_ms": meas["saved_ms"],
        "measured_ms": max(meas["saved_ms"], 0.0),
        "measured_band": meas["band"],
        "measured_noise_ms": meas["noise_ms"],
        "fallback_band": meas["noise_ms"] is None,
    }
    if predicted["speedup"] is None:
        return replace(base, reason=Reason.ALL_ONE_LABEL, predicted_speedup=None, **figures)
    j = judge(
        {**predicted, "saved_band_ms": tuple(band) if band else None},
        meas,
        step_ms=step,
        experiment=experiment,
        bound=bound,
    )
    status = Check(j["status"])
    slower = compute_ms is not None and compute_ms[0] > 0 and compute_ms[1] > COMPUTE_DRIFT * compute_ms[0]
    faster = (
        not compute_may_gain
        and compute_ms is not None
        and compute_ms[1] > 0
        and compute_ms[0] > COMPUTE_DRIFT * compute_ms[1]
    )
    drift = status in (Check.PARTLY, Check.NOT_CONFIRMED) and (
        (measured_speedup < predicted["speedup"] and slower) or (measured_speedup > predicted["speedup"] and faster)
    )
    if drift:
        return replace(base, reason=Reason.COMPUTE_DRIFT, **figures)
    return replace(
        base,
        status=status,
        reason=Reason.NOISE if status is Check.INCONCLUSIVE else None,
        above_bound=bool(j["above_bound"]),
        agreement_band=j["agreement_band"],
        **figures,
    )
