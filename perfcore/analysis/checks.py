"""Checks: what an experiment measured against what was predicted, typed (Check), and the one place a
prediction meets a measurement (reconcile). An experiment that removed a cause checks the attribution's
prediction (PREDICTION), one that changed a setting is held to the most any setting can give (BOUND), one
that made the advice's own change measures it (ADVICE), and one that removed the cause altogether caps what
any advice on it can give (CEILING). Statuses and figures only: report.words says them. Pure functions."""

from __future__ import annotations

import dataclasses
import enum
import statistics
from typing import Any, Mapping

from perfcore.analysis.gain import BAND_Z, expected_gain, judge, measured_gain
from perfcore.analysis.status import Agreement, Change, change_of

__all__ = [
    "COMPUTE_DRIFT",
    "MATERIAL_X",
    "NOISE_SE",
    "step_sem_ms",
    "difference_noise_ms",
    "Experiment",
    "Against",
    "Reason",
    "Busy",
    "Prediction",
    "Measurement",
    "Check",
    "reconcile",
]


class Experiment(str, enum.Enum):
    """diagnose's runs, each against the baseline: synthetic data (no loading), the workers changed, the
    other decoder."""

    BASELINE = "baseline"
    SYNTHETIC = "A"
    WORKERS = "B"
    DECODER = "C"


# Two short runs' mean step times differ by a few percent with nothing changed: without a measured
# spread a saving within 5% of the step of the predicted one agrees with it (gain.FALLBACK_STEP);
# with one, the runs' own noise sets the band (a busy host: waits end on scheduler ticks).
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


class Against(str, enum.Enum):
    """What a measurement is held to (see the module's docstring)."""

    PREDICTION = "prediction"
    BOUND = "bound"
    ADVICE = "advice"
    CEILING = "ceiling"


class Reason(str, enum.Enum):
    """Why a check is inconclusive: the values are what diagnose.json carries."""

    NO_MEASUREMENT = "no measurement"  # the experiment gave no step time
    ALL_ONE_LABEL = "all one label"  # the step is all of the cause: removing it leaves no finite step
    NOISE = "noise"  # the runs' noise is as large as the predicted saving
    COMPUTE_DRIFT = "compute drift"  # compute itself changed between the runs: the machine, not the cause


# Removing a cause never makes compute itself slower: when the experiment's compute per step is this much
# above the baseline's, the machine changed between the runs and the A/B cannot correct anything.
COMPUTE_DRIFT = 1.25
# A measured speedup below this is no gain worth a change.
MATERIAL_X = 1.10


@dataclasses.dataclass(frozen=True)
class Prediction:
    """What the model says removing `label`'s cause saves of a `step_ms` step (ms, with its interval), and
    what the measurement is held to (`against`)."""

    label: str
    step_ms: float
    saved_ms: float
    saved_band_ms: tuple[float, float] | None = None
    against: Against = Against.PREDICTION
    speedup: float | None = None  # ADVICE / CEILING: the advice's own predicted speedup


@dataclasses.dataclass(frozen=True)
class Measurement:
    """An experiment's run against the baseline: its speedup (base / this), the noise of the difference of
    the two runs' mean steps (ms), compute per step in both (the control), whether compute may truly gain
    without the cause, the machine's load during the busier run, and the setting it changed."""

    experiment: Experiment
    name: str
    speedup: float | None
    noise_ms: float | None = None
    compute_ms: tuple[float, float] | None = None
    compute_may_gain: bool = True
    busy: "Busy | None" = None
    num_workers: int | None = None


@dataclasses.dataclass(frozen=True)
class Busy:
    """Other processes' cores during a run, measured."""

    others_cores: float | None
    cores: int | None = None
    material: bool = False


@dataclasses.dataclass(frozen=True)
class Check:
    """What an experiment measured of a prediction: held to what (`against`), the status where it is judged
    (confirmed / partly / not confirmed / inconclusive, or within a bound), the reason when inconclusive, the
    change the runs' noise allows calling it (faster / slower / within noise), and every figure (ms per
    step): the savings compared (measured signed: negative is slower), their bands, the control's compute
    per step (baseline, experiment) and the machine's load measured during the busier run."""

    label: str
    experiment: Experiment
    name: str
    against: Against = Against.PREDICTION
    status: Agreement | None = None
    reason: Reason | None = None
    change: Change | None = None
    step_ms: float | None = None
    predicted_speedup: float | None = None
    measured_speedup: float | None = None
    predicted_ms: float | None = None
    measured_saved_ms: float | None = None
    measured_ms: float | None = None  # the saving the experiment implies (>= 0), for a corrected verdict
    bound_ms: float | None = None
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
    num_workers: int | None = None
    material: bool = False

    @property
    def agrees(self) -> bool | None:
        """True confirmed, False partly / not confirmed, None otherwise (inconclusive, held to a bound)."""
        return {Agreement.CONFIRMED: True, Agreement.PARTLY: False, Agreement.NOT_CONFIRMED: False}.get(self.status)

    @property
    def above_1x(self) -> bool:
        """What it measured lies above 1x: its band's low end, where both runs' spread gave one; without a
        band, MATERIAL_X or more and not within the runs' noise (two runs' mean steps differ by a few
        percent with nothing changed). The one test of whether a measurement is offered as a gain."""
        x = self.measured_speedup
        if x is None or not x > 1.0 or self.below_1x:
            return False
        b = self.measured_band
        if b is not None and b[0] is not None:
            return b[0] > 1.0
        return x >= MATERIAL_X and self.change in (None, Change.FASTER)

    @property
    def below_1x(self) -> bool:
        """What it measured is below 1x, or slower beyond the runs' noise: never offered as a gain."""
        return self.measured_speedup is not None and (self.measured_speedup < 1.0 or self.change is Change.SLOWER)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def reconcile(prediction: Prediction, measurement: Measurement) -> Check:
    """The one judgement of a measurement against a prediction (see the module's docstring)."""
    if prediction.against is Against.PREDICTION:
        return _against_prediction(prediction, measurement)
    if prediction.against is Against.BOUND:
        return _against_bound(prediction, measurement)
    return _against_advice(prediction, measurement)


def _busy_fields(busy: Busy | None) -> dict[str, Any]:
    return {
        "others_cores": _num(busy.others_cores) if busy else None,
        "cores": busy.cores if busy and isinstance(busy.cores, int) else None,
        "machine_busy": bool(busy and busy.material),
    }


def _against_prediction(p: Prediction, m: Measurement) -> Check:
    """A measured A/B speedup (the step without `label`'s cause) against the attribution's prediction:
    gain.judge on the two savings in ms, the prediction's band widened by the runs' noise. The control:
    inconclusive (COMPUTE_DRIFT) when compute drifted up, or down when it may not gain (nothing the
    experiment removed ran beside compute), so only the machine changed."""
    step = float(p.step_ms or 0.0)
    band = p.saved_band_ms
    predicted = expected_gain(step, p.saved_ms, saved_band_ms=tuple(band) if band else None) if step else None
    base = Check(
        label=p.label,
        experiment=m.experiment,
        name=m.name,
        status=Agreement.INCONCLUSIVE,
        reason=Reason.NO_MEASUREMENT,
        step_ms=step or None,
        predicted_speedup=predicted["speedup"] if predicted else 1.0,
        predicted_ms=predicted["saved_ms"] if predicted else None,
        predicted_band=predicted["band"] if predicted else None,
        compute_ms=tuple(m.compute_ms) if m.compute_ms is not None else None,
        **_busy_fields(m.busy),
    )
    x = m.speedup
    if not x or x != x or not step:
        return base
    meas = measured_gain(step, step / x, noise_ms=m.noise_ms)
    figures = {
        "measured_speedup": x,
        "measured_saved_ms": meas["saved_ms"],
        "measured_ms": max(meas["saved_ms"], 0.0),
        "measured_band": meas["band"],
        "measured_noise_ms": meas["noise_ms"],
        "fallback_band": meas["noise_ms"] is None,
    }
    if predicted["speedup"] is None:
        return dataclasses.replace(base, reason=Reason.ALL_ONE_LABEL, predicted_speedup=None, **figures)
    j = judge({**predicted, "saved_band_ms": tuple(band) if band else None}, meas, step_ms=step, experiment=m.name)
    status = Agreement(j["status"])
    c = m.compute_ms
    slower = c is not None and c[0] > 0 and c[1] > COMPUTE_DRIFT * c[0]
    faster = not m.compute_may_gain and c is not None and c[1] > 0 and c[0] > COMPUTE_DRIFT * c[1]
    drift = status in (Agreement.PARTLY, Agreement.NOT_CONFIRMED) and (
        (x < predicted["speedup"] and slower) or (x > predicted["speedup"] and faster)
    )
    if drift:
        return dataclasses.replace(base, reason=Reason.COMPUTE_DRIFT, **figures)
    return dataclasses.replace(
        base,
        status=status,
        reason=Reason.NOISE if status is Agreement.INCONCLUSIVE else None,
        above_bound=bool(j["above_bound"]),
        agreement_band=j["agreement_band"],
        **figures,
    )


def _against_bound(p: Prediction, m: Measurement) -> Check:
    """A setting's measured speedup against the most any setting can give (removing all of the cause): a gain
    above it is flagged (noise, or the machine changed between the runs); inconclusive when the noise is as
    large as the bound and the saving inside it."""
    step = float(p.step_ms)
    ceiling = expected_gain(step, p.saved_ms, saved_band_ms=tuple(p.saved_band_ms) if p.saved_band_ms else None)
    noise = m.noise_ms
    meas = measured_gain(step, step / m.speedup, noise_ms=noise)
    band = p.saved_band_ms
    above = ceiling["speedup"] is not None and meas["saved_ms"] > (band[1] if band else ceiling["saved_ms"])
    noisy = noise is not None and noise >= max(ceiling["saved_ms"], 1e-9) and abs(meas["saved_ms"]) <= noise
    return Check(
        label=p.label,
        experiment=m.experiment,
        name=m.name,
        against=Against.BOUND,
        status=Agreement.INCONCLUSIVE if noisy else Agreement.BOUND,
        change=change_of(m.speedup, noise / step if noise is not None and step else None),
        step_ms=step,
        predicted_speedup=ceiling["speedup"],
        measured_speedup=m.speedup,
        measured_band=meas.get("band"),
        measured_noise_ms=noise,
        above_bound=bool(above),
        num_workers=m.num_workers,
        compute_ms=tuple(m.compute_ms) if m.compute_ms is not None else None,
        bound_ms=ceiling["saved_ms"],
        measured_saved_ms=meas["saved_ms"],
    )


def _against_advice(p: Prediction, m: Measurement) -> Check:
    """An experiment that made the advice's change (ADVICE), or removed its cause altogether (CEILING): its
    speedup, with its band from both runs' spread where they report one, whether it is material (MATERIAL_X
    or more) and what the runs' noise allows calling it."""
    x = float(m.speedup)
    step = float(p.step_ms or 0.0)
    noise = m.noise_ms
    band = None
    if noise is not None and step:
        b = measured_gain(step, step / x, noise_ms=noise)["band"]
        band = (b[0], b[1]) if b and b[0] is not None and b[1] is not None else None
    return Check(
        label=p.label,
        experiment=m.experiment,
        name=m.name,
        against=p.against,
        change=change_of(x, noise / step if noise is not None and step else None),
        step_ms=step or None,
        predicted_speedup=p.speedup,
        measured_speedup=x,
        measured_band=band,
        measured_noise_ms=noise,
        compute_ms=tuple(m.compute_ms) if m.compute_ms is not None else None,
        material=x >= MATERIAL_X,
    )
