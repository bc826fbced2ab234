"""The one verdict: which avoidable cause, if any, costs a step enough to be named. A pure function of a
few numbers (avoidable ms per label and the step's ms), so every command, a live status line and a
partial run all reach the same words on the same evidence.

Compute is the healthy state. What a user can remove is the rest of the step: the exposed wait for
data (load not hidden by workers), exposed copies, exposed collectives and host gaps. Each label's
exposed time (the attribution's own definition) is exactly what would leave the step if that
cause were removed, so it is also the expected gain.
"""
from __future__ import annotations

import statistics
from typing import Any, Mapping

__all__ = ["AVOIDABLE", "WARN_SHARE", "CRITICAL_SHARE", "STARTUP_DOMINATES", "COMPUTE_DRIFT", "NOISE_SHARE",
           "THRESHOLDS_RATIONALE",
           "avoidable",
           "decide", "decide_run", "confirm", "startup_share"]

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
THRESHOLDS_RATIONALE = ("a cause is named at >= 10% of the step (warn), critical at >= 20%; otherwise healthy, "
                        "compute-bound (seed stage 1: >= 60% busy is healthy; XProf input-bound 5%/20%; "
                        "TraceML 10%/20%)")

# bound name, what the time is, how the attribution measured it (GPU, no GPU)
_CAUSES = {
    "load": ("input-bound", "waiting for data",
             "the host waits in the DataLoader's next() while no GPU work runs",
             "the loop waits in the DataLoader's next()"),
    "transfer": ("transfer-bound", "host-to-device copies not hidden by compute",
                 "copy time with no kernel running", "time in the copy phase"),
    "comm": ("communication-bound", "collective communication not hidden by compute",
             "collective kernels with no compute kernel running", "time inside collectives"),
    "host": ("host-bound", "host gaps (the GPU idles while Python, launches or syncs run)",
             "step time no kernel, copy or data wait covers",
             "host gaps (step time outside loading, copies and forward/backward/optimizer: Python, logging, syncs)"),
}


def avoidable(breakdown_ms: Mapping[str, float]) -> dict[str, float]:
    """The avoidable ms per step of each non-compute label of an attribution breakdown."""
    return {lb: float(breakdown_ms.get(lb) or 0.0) for lb in AVOIDABLE}


def _level(share: float) -> str:
    return "critical" if share >= CRITICAL_SHARE else "warn" if share >= WARN_SHARE else "minor"


def _speedup(step_ms: float, ms: float) -> float | None:
    """step / (step - ms); None when nothing would be left (no finite figure, and JSON has no inf)."""
    left = step_ms - ms
    return step_ms / left if left > 1e-9 else None


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
    return {"ms": cost, "time_to_first_step_ms": ttfs, "share_of_run": share, "dominates": share >= STARTUP_DOMINATES,
            "sentence": (f"{ttfs / 1e3:.1f} s from launch to the end of the first step"
                         + (f" (which took {first:.0f} ms; a steady one {steady:.0f} ms)" if first else "")
                         + f" is {100 * share:.0f}% of this run"
                         + (f" of {steps} steps; a longer run dilutes it" if steps else ""))}


def decide(avoidable_ms: Mapping[str, float], step_ms: float, *, on_gpu: bool = False,
           measured_by: Mapping[str, str] | None = None, compute_ms: float | None = None,
           startup: Mapping[str, Any] | None = None, steps: int = 0) -> dict[str, Any]:
    """The verdict from the avoidable ms per step of each cause (load, transfer, comm, host) and the
    step's ms. Returns {bound, level, healthy, primary, causes (ranked, each with ms_per_step, share,
    level, evidence, expected_speedup), summary, thresholds[, startup]}. `measured_by` replaces the
    default "how measured" of a label (diagnose passes its A/B measurement)."""
    step = float(step_ms or 0.0)
    if not step > 0:  # nothing measured yet (a live view before the first step, a warm-up-only run)
        return {"bound": "unknown", "level": "unknown", "healthy": None, "primary": None, "causes": [],
                "avoidable_ms": {}, "step_ms": 0.0, "summary": "no steps measured",
                "thresholds": {"warn": WARN_SHARE, "critical": CRITICAL_SHARE, "rationale": THRESHOLDS_RATIONALE}}
    causes = []
    for lb in AVOIDABLE:
        ms = max(0.0, float(avoidable_ms.get(lb) or 0.0))
        share = ms / step if step > 0 else 0.0
        bound, what, how_gpu, how_cpu = _CAUSES[lb]
        if lb == "host" and not on_gpu:
            what = "host gaps (time outside loading and the model's forward/backward/optimizer)"
        how = (measured_by or {}).get(lb) or (how_gpu if on_gpu else how_cpu)
        gain = _speedup(step, ms)
        causes.append({"label": lb, "bound": bound, "what": what, "ms_per_step": ms, "share": share,
                       "level": _level(share), "expected_speedup": gain, "expected_step_ms": max(step - ms, 0.0),
                       "evidence": f"{ms:.2f} ms of a {step:.2f} ms step ({100 * share:.0f}%), measured as {how}"})
    causes.sort(key=lambda c: -c["ms_per_step"])
    named = [c for c in causes if c["level"] != "minor"]
    comp = compute_ms if compute_ms is not None else max(step - sum(c["ms_per_step"] for c in causes), 0.0)
    doc: dict[str, Any] = {"causes": named, "thresholds": {"warn": WARN_SHARE, "critical": CRITICAL_SHARE,
                                                           "rationale": THRESHOLDS_RATIONALE},
                           "step_ms": step, "avoidable_ms": {c["label"]: c["ms_per_step"] for c in causes}}
    if named:
        top = named[0]
        doc.update(bound=top["label"], level=top["level"], healthy=False, primary=top["label"])
        speed = ("" if top["expected_speedup"] is None else
                 f"; removing it would make steps up to {top['expected_speedup']:.2f}x faster")
        summary = (f"{top['bound']}: {top['what']} costs {top['ms_per_step']:.1f} ms of each {step:.1f} ms step "
                   f"({100 * top['share']:.0f}%; {top['level']} at >= "
                   f"{100 * (CRITICAL_SHARE if top['level'] == 'critical' else WARN_SHARE):.0f}%){speed}")
        if len(named) > 1:
            summary += ". Also " + ", ".join(f"{c['what'].split(' (')[0]} {c['ms_per_step']:.1f} ms "
                                             f"({100 * c['share']:.0f}%, {c['level']})" for c in named[1:])
    else:
        doc.update(bound="compute", level="healthy", healthy=True, primary=None)
        big = causes[0] if causes else None
        summary = (f"compute-bound (healthy): compute is {100 * comp / step if step else 0:.0f}% of each {step:.1f} ms "
                   f"step; no avoidable cause reaches {100 * WARN_SHARE:.0f}%")
        if big and big["ms_per_step"] > 0:
            summary += (f" (largest: {big['what'].split(' (')[0]} {big['ms_per_step']:.1f} ms, "
                        f"{100 * big['share']:.0f}%)")
    su = startup_share(startup, step, steps)
    if su:
        doc["startup"] = su
        if su["dominates"]:
            summary += f". Start-up dominates: {su['sentence']}"
    doc["summary"] = summary
    return doc


def decide_run(doc: Mapping[str, Any], *, measured_by: Mapping[str, str] | None = None) -> dict[str, Any]:
    """decide() on a perfcore.run/1 document (or any mapping with step_time_ms.mean and breakdown_ms)."""
    st = doc.get("step_time_ms")
    step = st["mean"] if isinstance(st, Mapping) else float(st or doc.get("step_ms") or 0.0)
    bd = doc.get("breakdown_ms") or {}
    return decide(avoidable(bd), step, on_gpu=str(doc.get("device", "cpu")) != "cpu",
                  compute_ms=bd.get("compute"), measured_by=measured_by, startup=doc.get("startup"),
                  steps=int(doc.get("steps") or 0))


# Removing a cause never makes compute itself slower: when the experiment's compute per step is this
# much above the baseline's, the machine changed between the runs and the A/B cannot correct anything.
COMPUTE_DRIFT = 1.25
# Two short runs' mean step times differ by a few percent with nothing changed: a measured saving
# within 5% of the step of the predicted one agrees with it, or within the runs' own noise when
# their step-to-step spread says it is larger (a busy host: waits end on scheduler ticks).
NOISE_SHARE = 0.05
NOISE_SE = 3.0  # standard errors of the difference of the two runs' mean steps


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


def confirm(decision: Mapping[str, Any], label: str, measured_speedup: float | None, experiment: str,
            tolerance: float = 0.15, compute_ms: tuple[float, float] | None = None,
            noise_ms: float | None = None) -> dict[str, Any]:
    """Does a measured A/B speedup (the step without `label`'s cause) agree with the verdict's
    prediction (the saving it implies within `tolerance` of the predicted saving, or within the noise:
    NOISE_SHARE of the step, or `noise_ms` when larger, the runs' own spread)? Returns {label,
    experiment, predicted_speedup, measured_speedup, agrees, measured_ms, sentence}; measured_ms is
    the saving the experiment implies, for a corrected verdict. compute_ms: (baseline, experiment)
    compute per step, the control: agrees is None when it drifted up."""
    step = float(decision.get("step_ms") or 0.0)
    ms = float((decision.get("avoidable_ms") or {}).get(label) or 0.0)
    predicted = _speedup(step, ms) if step else 1.0
    if not measured_speedup or measured_speedup != measured_speedup:
        return {"label": label, "experiment": experiment, "predicted_speedup": predicted, "measured_speedup": None,
                "agrees": None, "measured_ms": None, "sentence": f"{experiment}: no measurement"}
    implied = max(step - step / measured_speedup, 0.0) if step else 0.0
    if predicted is None:
        return {"label": label, "experiment": experiment, "predicted_speedup": None,
                "measured_speedup": measured_speedup, "agrees": None, "measured_ms": implied,
                "sentence": f"{experiment} measured {measured_speedup:.2f}x (the step is all {_CAUSES[label][1]})"}
    # In ms saved: within `tolerance` of the predicted saving, or within the noise floor of a step time.
    agrees = abs(implied - ms) <= max(tolerance * ms, NOISE_SHARE * step, noise_ms or 0.0)
    what = _CAUSES[label][1]
    drift = (compute_ms is not None and compute_ms[0] > 0 and compute_ms[1] > COMPUTE_DRIFT * compute_ms[0])
    if not agrees and measured_speedup < predicted and drift:
        return {"label": label, "experiment": experiment, "predicted_speedup": predicted,
                "measured_speedup": measured_speedup, "agrees": None, "measured_ms": implied,
                "sentence": (f"{experiment} measured {measured_speedup:.2f}x against {predicted:.2f}x predicted: "
                             f"inconclusive, compute itself went from {compute_ms[0]:.1f} to {compute_ms[1]:.1f} ms "
                             "per step between the runs (a busy machine); the attribution stands")}
    if agrees:
        s = (f"{experiment} measured {measured_speedup:.2f}x against {predicted:.2f}x predicted: confirmed")
    else:
        s = (f"{experiment} measured {measured_speedup:.2f}x against {predicted:.2f}x predicted: corrected, "
             f"{what} costs {implied:.1f} ms per step ({100 * implied / step if step else 0:.0f}%), "
             f"not {ms:.1f} ms")
    return {"label": label, "experiment": experiment, "predicted_speedup": predicted,
            "measured_speedup": measured_speedup, "agrees": agrees, "measured_ms": implied, "sentence": s}
