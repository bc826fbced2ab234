"""The judges of gpu_check's deciding rows: pure functions from measured figures to (ok, what it read),
no torch, so tests/test_gpu_check.py tries each with values on both sides of its bound.

A truth is the JSON a script in bench/gpu_scripts prints (meter.py): per label its ms per step and its
band as shares of the step. A run document is perfcore run's run.json, read by the names below; a name
missing from it is that row's FAIL, with the name.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from perfcore.analysis.verdict import WARN_SHARE

LABELS = ("load", "transfer", "compute", "comm", "host")
CAUSES = ("load", "transfer", "comm", "host")
SHARE_POINTS = 3.0  # perfcore run's shares against a script's truth
OVERHEAD_POINTS = 2.0  # the overhead perfcore reports against the one measured side by side
NOISE_POINTS = 1.0  # two bare runs further apart than this cannot decide a cost of a few points
TRACED_MAX = 0.03  # what a traced run may cost on the launch-bound step
PROFILER_RATIO = 3.0  # ... and how much cheaper than torch.profiler on the same loop
UTIL_ABS = 0.15  # NVML's utilisation (and health's busy share) against CUPTI's busy share
HANDOVER_REL = 0.20  # compute per step after the hand-over to torch.profiler against before
SIDE_STREAM_LOW, SIDE_STREAM_HIGH = 0.90, 0.10  # of the spin; over spin + bracket


class Missing(KeyError):
    """A figure the row reads is not in the document: the row fails and names it."""


def need(doc: Mapping[str, Any], path: str) -> Any:
    """doc's figure at a dotted path ("overhead.tracing_ms_per_step"), or Missing naming the path."""
    cur: Any = doc
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur or cur[part] is None:
            raise Missing(path)
        cur = cur[part]
    return cur


def own_ms_back(doc: Mapping[str, Any]) -> float:
    """perfcore's own time a step that its step wall leaves out (its work on the training thread, and
    kernel tracing's, each said as its own): the script's clock holds it, in the script's host time."""
    return float(need(doc, "overhead.own_ms_per_step")) + float(need(doc, "overhead.tracing_ms_per_step"))


def share_gaps(perf_ms: Mapping[str, float], own_ms: float, truth: Mapping[str, Any]) -> dict[str, float]:
    """Each label's distance from the truth's band, in points of the truth's step: perfcore's ms per
    step (host with perfcore's own time given back) outside [lo, hi] x step, signed; 0 inside."""
    step = float(truth["step_ms"])
    out = {}
    for lb in LABELS:
        v = float(perf_ms[lb]) + (own_ms if lb == "host" else 0.0)
        lo, hi = (float(b) * step for b in truth["band"][lb])
        gap = v - hi if v > hi else v - lo if v < lo else 0.0
        out[lb] = 100.0 * gap / step if step > 0 else math.inf
    return out


def shares_ok(gaps: Mapping[str, float], points: float = SHARE_POINTS) -> bool:
    return all(abs(g) <= points for g in gaps.values())


def bottlenecks(truth: Mapping[str, Any], points: float = SHARE_POINTS) -> set[str]:
    """What perfcore's verdict may name on this truth: its rule (the largest of load/transfer/comm/host
    when it holds >= WARN_SHARE of the step, else compute) on every share within `points` of the
    truth's band. One label where the truth is clear; two where causes are closer than that."""
    tol = points / 100.0
    lo = {c: truth["band"][c][0] - tol for c in CAUSES}
    hi = {c: truth["band"][c][1] + tol for c in CAUSES}
    top_lo = max(lo.values())
    names = {c for c in CAUSES if hi[c] >= top_lo and hi[c] >= WARN_SHARE}
    if top_lo < WARN_SHARE:
        names.add("compute")
    return names


def named_causes(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The causes perfcore's verdict names (perfcore.run/2: its ranked causes past the minor tier), in order."""
    return [c for c in need(doc, "verdict").get("ranked") or [] if c.get("level") != "minor"]


def verdict_label(doc: Mapping[str, Any]) -> str:
    """The label perfcore's verdict names: its first cause's, or compute when it names none."""
    causes = named_causes(doc)
    return str(causes[0]["label"]) if causes else "compute"


def pin_advice(doc: Mapping[str, Any]) -> tuple[bool, tuple[float, float] | None, str]:
    """Whether the advice names pinning, and the speedup band it gives: the pinning advice's own gain,
    else the transfer cause's expected gain (the advice is that cause's). where: which one."""
    recs = doc.get("findings") or []
    pin = next((r for r in recs if r.get("kind") in ("pin_memory", "pageable_despite_pin")), None)
    if pin is None:
        return False, None, "no pinning advice"
    band = (pin.get("gain") or {}).get("band")
    if band and None not in band:
        return True, (float(band[0]), float(band[1])), f"{pin['kind']} advice's gain"
    cause = next((c for c in named_causes(doc) if c.get("label") == "transfer"), None)
    band = ((cause or {}).get("gain") or {}).get("band")
    if band and None not in band:
        return True, (float(band[0]), float(band[1])), "the transfer cause's expected gain"
    return True, None, f"{pin['kind']} advice without a band"


def in_band(x: float, band: tuple[float, float] | None) -> bool:
    return band is not None and band[0] <= x <= band[1]


def overhead_points(step_ms: float, bare_ms: float) -> float:
    """A run's cost measured side by side: its step against the bare script's, in points of the bare."""
    return 100.0 * (float(step_ms) - float(bare_ms)) / float(bare_ms)


def reported_points(doc: Mapping[str, Any], bare_ms: float) -> float:
    """What perfcore says it cost a step, kernel tracing included, in points of the bare step: its
    overhead figure, plus tracing's where that figure does not count it already (no "kernel_tracing"
    among its `counted` codes)."""
    ms = float(need(doc, "overhead.ms_per_step"))
    tracing = float(need(doc, "overhead.tracing_ms_per_step"))
    if "kernel_tracing" not in (doc["overhead"].get("counted") or ()):
        ms += tracing
    return 100.0 * ms / float(bare_ms)


def overhead_ok(reported: float, measured: float, noise: float, points: float = OVERHEAD_POINTS) -> bool:
    """Reported within `points` of measured, each way, where the bare runs agree within NOISE_POINTS."""
    return noise <= NOISE_POINTS and abs(reported - measured) <= points


def tracing_ok(traced_points: float, profiler_points: float, noise: float) -> tuple[bool, bool]:
    """(a traced run costs <= TRACED_MAX of the step, torch.profiler costs >= PROFILER_RATIO x it), each
    only where the bare runs agree within NOISE_POINTS (a cost measured below -noise is noise too)."""
    sure = noise <= NOISE_POINTS and traced_points >= -NOISE_POINTS
    cheap = sure and traced_points <= 100.0 * TRACED_MAX
    cheaper = sure and profiler_points > 0 and profiler_points >= PROFILER_RATIO * max(traced_points, 0.0)
    return cheap, cheaper


def util_ok(util: float, busy: float, tol: float = UTIL_ABS) -> bool:
    return abs(float(util) - float(busy)) <= tol


def handover_ok(before_ms: float, after_ms: float, rel: float = HANDOVER_REL) -> bool:
    return before_ms > 0 and abs(after_ms - before_ms) <= rel * before_ms


def side_stream_ok(got_ms: float, spin_ms: float, bracket_ms: float) -> bool:
    """At least 90% of the spin, at most spin + bracket + 10% (double counting fails)."""
    return SIDE_STREAM_LOW * spin_ms <= got_ms <= (spin_ms + bracket_ms) * (1 + SIDE_STREAM_HIGH)


def reported_overhead_ok(reported_us: float, measured_us: float, spread_us: float) -> bool:
    """perfcore's reported cost against the measured one, each way: within 2 x spread + 1 us."""
    return abs(reported_us - measured_us) <= 2 * spread_us + 1.0


def starts_ok(deltas_ns: list[float], bracket_ns: float, uncertainty_ns: float) -> bool:
    """Event-placed starts against CUPTI's for the same kernels: each CUPTI start after its event's by
    at most the event bracket, within twice the anchor's uncertainty either way."""
    return bool(deltas_ns) and all(-2 * uncertainty_ns <= d <= bracket_ns + 2 * uncertainty_ns for d in deltas_ns)
