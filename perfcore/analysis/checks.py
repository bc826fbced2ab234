"""The checks of a verdict: does an experiment's measured speed-up (the step without one cause) agree with
what the verdict predicts removing it saves? The prediction's figures, the runs' noise, and the status
(confirmed / partly / not confirmed / inconclusive, with the reason) with its numbers. Pure functions."""

from __future__ import annotations

import statistics
from typing import Any, Mapping

from perfcore.analysis.gain import BAND_Z, expected_gain, judge, measured_gain
from perfcore.analysis.units import fmt_ms, fmt_x
from perfcore.analysis.verdict import what_of

__all__ = [
    "COMPUTE_DRIFT",
    "NOISE_SHARE",
    "NOISE_SE",
    "prediction",
    "step_sem_ms",
    "difference_noise_ms",
    "confirm",
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
) -> dict[str, Any]:
    """Does a measured A/B speedup (the step without `label`'s cause) agree with the verdict's
    prediction? gain.judge on the two savings in ms: the prediction's band (from the verdict's
    intervals) widened by the runs' noise `noise_ms` (NOISE_SE standard errors of the difference of
    their mean steps). Returns {label, experiment, status, predicted_speedup, measured_speedup, agrees
    (True confirmed, False partly / not confirmed, None inconclusive), measured_ms, above_bound,
    sentence}; measured_ms is the saving the experiment implies, for a corrected verdict. compute_ms:
    (baseline, experiment) compute per step, the control: inconclusive when it drifted up, or down
    when compute_may_gain is False (nothing the experiment removed ran beside compute: loading in
    the main process on a CPU, or any loading against GPU kernels), so only the machine changed.
    busy: the interference measured during the two runs ({others_cores, cores, material}): the drift is
    put down to a busy machine only when one was measured busy, and otherwise said as unexplained."""
    step = float(decision.get("step_ms") or 0.0)
    ms = float((decision.get("avoidable_ms") or {}).get(label) or 0.0)
    band = (decision.get("avoidable_band_ms") or {}).get(label)
    predicted = expected_gain(step, ms, saved_band_ms=tuple(band) if band else None) if step else None
    base = {
        "label": label,
        "experiment": experiment,
        "status": "no measurement",
        "predicted_speedup": predicted["speedup"] if predicted else 1.0,
        "measured_speedup": measured_speedup,
        "agrees": None,
        "measured_ms": None,
        "above_bound": False,
    }
    if not measured_speedup or measured_speedup != measured_speedup or not step:
        return {**base, "measured_speedup": None, "sentence": f"{experiment}: no measurement"}
    exp_ms = step / measured_speedup
    meas = measured_gain(step, exp_ms, noise_ms=noise_ms)
    implied = max(meas["saved_ms"], 0.0)
    base.update(measured_ms=implied)
    if predicted["speedup"] is None:
        return {
            **base,
            "predicted_speedup": None,
            "status": "inconclusive",
            "sentence": f"{experiment} measured {fmt_x(measured_speedup)} (the step is all {what_of(label)})",
        }
    j = judge(
        {**predicted, "saved_band_ms": tuple(band) if band else None},
        meas,
        step_ms=step,
        experiment=experiment,
        what=what_of(label),
        bound=bound,
    )
    slower = compute_ms is not None and compute_ms[0] > 0 and compute_ms[1] > COMPUTE_DRIFT * compute_ms[0]
    faster = (
        not compute_may_gain
        and compute_ms is not None
        and compute_ms[1] > 0
        and compute_ms[0] > COMPUTE_DRIFT * compute_ms[1]
    )
    if j["status"] in ("partly", "not confirmed") and (
        (measured_speedup < predicted["speedup"] and slower) or (measured_speedup > predicted["speedup"] and faster)
    ):
        measured_busy = bool(busy and busy.get("material"))
        if busy and busy.get("others_cores") is not None:
            why = f"other processes used {busy['others_cores']:.1f} of {busy.get('cores', '?')} cores (measured)" + (
                "" if measured_busy else ": not a busy machine"
            )
        else:
            why = "no interference measured"
        return {
            **base,
            "status": "inconclusive",
            "measured_noise_ms": meas["noise_ms"],
            "reason": "compute drift",
            "machine_busy": measured_busy,
            "sentence": (
                f"{experiment} measured {fmt_x(measured_speedup)} against {fmt_x(predicted['speedup'])} "
                f"predicted: inconclusive, compute itself went from {fmt_ms(compute_ms[0])} to "
                f"{fmt_ms(compute_ms[1])} per step between the runs ({why}); the attribution stands"
            ),
        }
    return {
        **base,
        "status": j["status"],
        "agrees": j["agrees"],
        "above_bound": j["above_bound"],
        "predicted_band": predicted["band"],
        "measured_band": meas["band"],
        "measured_noise_ms": meas["noise_ms"],
        "agreement_band": j["agreement_band"],
        "sentence": j["sentence"],
    }
