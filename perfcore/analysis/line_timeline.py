"""Host time on the steps' axis, for the report's chart: per bin of consecutive steps, the ms per step each
of the top host functions held (from the line samples, folded to the user's functions as analysis.lines
folds them), and the rest of host time. Pure functions on arrays; no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from perfcore.analysis.attribution import CPU_PRECEDENCE, LABELS
from perfcore.analysis.codec import Ms
from perfcore.analysis.lines import fold, label_at, sample_weights, step_of
from perfcore.capture.line_sampler import LineSamples

__all__ = ["HostTimeline", "host_timeline", "TIMELINE_BINS", "TIMELINE_TOP", "TIMELINE_SAMPLES_PER_BIN"]

TIMELINE_BINS = 600  # the report's chart bins: a fixed size whatever the run's length
TIMELINE_TOP = 4  # functions drawn apart on the time axis; the rest of host time is one series
# Host samples a bin holds on average, at least: steps much shorter than the sampling interval would
# otherwise draw one sample's whole interval on one step and nothing on the next nine.
TIMELINE_SAMPLES_PER_BIN = 4


@dataclass(frozen=True)
class HostTimeline:
    """Host time on the steps' axis: per bin of consecutive joined steps, the ms per step each of the top
    host functions held (sampled), and the rest of the host samples' time."""

    first_step: tuple[int, ...]  # step number of each bin's first step
    last_step: tuple[int, ...]
    steps: tuple[int, ...]  # joined steps in the bin
    functions: tuple[tuple[str, str, int], ...]  # (file, function, hottest line), most time first
    ms_per_step: tuple[tuple[Ms, ...], ...]  # per function, per bin
    other_ms_per_step: tuple[Ms, ...]  # the rest of host time, per bin


def host_timeline(
    samples: LineSamples,
    step_start_ns: np.ndarray,
    step_end_ns: np.ndarray,
    step_numbers: np.ndarray,
    intervals: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    *,
    prefixes: tuple[str, ...],
    precedence: tuple[str, ...] = CPU_PRECEDENCE,
    top: int = TIMELINE_TOP,
) -> HostTimeline | None:
    """The host label's samples per bin of the given steps (as join_lines takes them, with their step
    numbers), split by the `top` functions that held the most host time over all of them; at most
    TIMELINE_BINS bins, and TIMELINE_SAMPLES_PER_BIN host samples a bin on average. None when no host sample falls in a step."""
    s0, s1 = np.asarray(step_start_ns, np.int64), np.asarray(step_end_ns, np.int64)
    numbers = np.asarray(step_numbers, np.int64)
    if samples.dropped and len(samples.t_ns):
        covered = s1 <= samples.t_ns[-1]
        s0, s1, numbers = s0[covered], s1[covered], numbers[covered]
    n = len(s0)
    if n == 0 or len(samples.t_ns) == 0:
        return None
    weight = sample_weights(samples.t_ns, samples.interval_ns, samples.cap_ns)
    step = step_of(samples.t_ns, s0, s1)
    inside = step >= 0
    host = np.zeros(len(step), dtype=bool)
    host[inside] = label_at(samples.t_ns[inside], intervals or {}, precedence) == LABELS.index("host")
    if not host.any():
        return None
    site_of, sites, _ = fold(samples.stacks, prefixes)
    site, w, step = site_of[samples.stack[host]], weight[host], step[host]
    # A function is (file, function): its lines' time together, as join_lines ranks them.
    keys = [(f.file, f.function) for f in sites]
    fn_ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    fn_of_site = np.array([fn_ids[k] for k in keys], dtype=np.int64)
    fn = fn_of_site[site]
    fn_ns = np.bincount(fn, weights=w, minlength=len(fn_ids))
    chosen = [int(k) for k in np.argsort(-fn_ns, kind="stable")[:top] if fn_ns[k] > 0]
    k = max(1, min(TIMELINE_BINS, n, int(host.sum()) // TIMELINE_SAMPLES_PER_BIN))
    edges = (np.arange(k + 1, dtype=np.int64) * n) // k  # bin i holds joined steps [edges[i], edges[i+1])
    which = np.searchsorted(edges, step, side="right") - 1
    count = np.diff(edges)
    series = []
    rest = np.ones(len(fn), dtype=bool)
    for c in chosen:
        mine = fn == c
        rest &= ~mine
        series.append(np.bincount(which[mine], weights=w[mine], minlength=k) / 1e6 / count)
    other = np.bincount(which[rest], weights=w[rest], minlength=k) / 1e6 / count
    names = list(fn_ids)
    hottest = {}
    for s_idx in np.argsort(-np.bincount(site, weights=w, minlength=len(sites)), kind="stable"):
        hottest.setdefault(fn_of_site[s_idx], sites[s_idx].line)
    return HostTimeline(
        first_step=tuple(int(v) for v in numbers[edges[:-1]]),
        last_step=tuple(int(v) for v in numbers[edges[1:] - 1]),
        steps=tuple(int(v) for v in count),
        functions=tuple((names[c][0], names[c][1], int(hottest[c])) for c in chosen),
        ms_per_step=tuple(tuple(float(v) for v in sr) for sr in series),
        other_ms_per_step=tuple(float(v) for v in other),
    )
