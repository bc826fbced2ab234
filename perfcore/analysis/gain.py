"""The one expected-gain model: how much faster a step gets when a cause is removed, predicted from the
attribution, measured by an A/B pair of runs, and the two judged against each other with both runs'
noise. health, run, diagnose, sweep and the notebook magic all predict a gain through `expected_gain`
(report.words.gain_words says it), and diagnose's checks are decided only by `judge`.

A gain is carried in saved milliseconds per step, where noise adds up (variances of independent
runs add); it is shown as a speed ratio step / (step - saved).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from perfcore.analysis.status import Agreement

__all__ = ["BAND_Z", "speedup", "expected_gain", "measured_gain", "judge"]

# Half-width of a band in standard errors: ~95% when the errors are normal. A band is where a
# second measurement of the same thing may land.
BAND_Z = 2.0
# Without a measured spread (a run that reports none), two short runs' mean steps still differ by a
# few percent with nothing changed: a prediction is then allowed 15% of itself or 5% of the step.
FALLBACK_REL = 0.15
FALLBACK_STEP = 0.05


def speedup(step_ms: float, saved_ms: float) -> float | None:
    """step / (step - saved); None when nothing would be left (no finite figure, and JSON has no inf)."""
    left = float(step_ms) - float(saved_ms)
    return float(step_ms) / left if left > 1e-9 else None


def expected_gain(
    step_ms: float, saved_ms: float, *, saved_band_ms: tuple[float, float] | None = None
) -> dict[str, Any]:
    """The gain of removing a cause whose exposed time is `saved_ms` of a `step_ms` step (the attribution:
    exposed time is exactly what leaves the step). saved_band_ms: the interval of that saving (from the
    per-step samples), which becomes the band of the speedup. Returns {saved_ms, step_after_ms, speedup,
    band: (lo, hi) | None}: figures only."""
    step = float(step_ms or 0.0)
    saved = min(max(float(saved_ms or 0.0), 0.0), step) if step > 0 else 0.0
    x = speedup(step, saved) if step > 0 else None
    band = None
    if saved_band_ms is not None and step > 0:
        lo_ms, hi_ms = (min(max(float(v), 0.0), step) for v in saved_band_ms)
        band = (speedup(step, lo_ms), speedup(step, hi_ms))
        if band[0] is None:
            band = None
    return {"saved_ms": saved, "step_after_ms": max(step - saved, 0.0), "speedup": x, "band": band}


def measured_gain(base_ms: float, exp_ms: float, *, noise_ms: float | None = None) -> dict[str, Any]:
    """What an A/B pair measured: the saving base - exp per step, its noise (noise_ms: BAND_Z standard errors
    of the difference of the two runs' mean steps, as analysis.checks measures it; None when a run reports no
    spread), and the speedup with its band."""
    base, exp = float(base_ms), float(exp_ms)
    saved = base - exp
    noise = None if noise_ms is None else float(noise_ms)
    x = base / exp if exp > 0 else None
    band = None
    if noise is not None and base > 0:
        lo_left, hi_left = base - (saved - noise), base - (saved + noise)
        band = (base / lo_left if lo_left > 0 else None, base / hi_left if hi_left > 0 else None)
    return {"saved_ms": saved, "noise_ms": noise, "speedup": x, "band": band}


def judge(
    predicted: Mapping[str, Any],
    measured: Mapping[str, Any],
    *,
    step_ms: float,
    experiment: str,
    bound_ms: float | None = None,
) -> dict[str, Any]:
    """A measured gain against the predicted one, both in ms saved per step.

    confirmed: the measured saving lies within the prediction's band (its own interval widened by the
      measurement's noise; without spreads, FALLBACK_REL of the prediction or FALLBACK_STEP of the step);
    inconclusive: the measured saving lies within the measurement's noise around none, so it cannot tell
      the predicted gain from none (whether or not the noise reaches the predicted effect);
    partly: a real saving (above the noise) that falls short of the band;
    not confirmed: no saving above the noise, or more than the band allows.
    bound_ms: the largest saving the change can physically give (removing all of the cause): a measured
      saving above it is flagged (noise or a changed machine, not an effect).
    Returns {experiment, status, agrees (True/False/None for inconclusive), predicted, measured,
    above_bound, agreement_band (the speedups a measurement agreeing with the prediction lies in)}: facts,
    said by report.words."""
    step = float(step_ms)
    p = float(predicted["saved_ms"])
    m = float(measured["saved_ms"])
    noise = measured["noise_ms"]
    pband = predicted.get("saved_band_ms")  # the prediction's own interval, where it has one
    p_half = max(abs(p - pband[0]), abs(pband[1] - p)) if pband else 0.0
    if noise is None:
        tol = max(FALLBACK_REL * p, FALLBACK_STEP * step, p_half)
        noise_floor = FALLBACK_STEP * step
    else:
        tol = math.hypot(p_half, float(noise))
        noise_floor = float(noise)
    # The band a measurement agreeing with the prediction falls in, printed with the verdict so that
    # "confirmed" can be checked against it: the prediction's interval widened by the noise.
    allow = (speedup(step, max(p - tol, 0.0)), speedup(step, p + tol)) if step > 0 else (None, None)
    lost_in_noise = noise is not None and noise_floor >= p and abs(m) <= noise_floor
    # A saving inside the noise around none agrees with no effect as well as with the prediction: it
    # confirms nothing (a busy demo said "predicted 2.00x, measured 1.25x: confirmed" on 13 ms saved of 25 ms noise).
    told_from_none = noise is None or abs(m) > noise_floor
    if abs(m - p) <= tol:
        check = Agreement.CONFIRMED if told_from_none and not lost_in_noise else Agreement.INCONCLUSIVE
    elif lost_in_noise:
        check = Agreement.INCONCLUSIVE
    elif noise_floor < m < p:
        check = Agreement.PARTLY
    else:
        check = Agreement.NOT_CONFIRMED
    status = check.value
    above = bound_ms is not None and m > bound_ms
    agrees = {Agreement.CONFIRMED: True, Agreement.INCONCLUSIVE: None}.get(check, False)
    return {
        "experiment": experiment,
        "status": status,
        "agrees": agrees,
        "predicted": dict(predicted),
        "measured": dict(measured),
        "above_bound": above,
        "agreement_band": allow,
    }
