"""perfcore run's host lines: the stack sampler and the sync-call counter on the training thread, their
samples carried to the part's writer in its facts (JSON: the raw part's facts travel in raw.json), and
there joined to the steps into run.json's "lines", with the loader's starvation as "starvation".

Stacks are folded to the user's sites here in the training process (where the library folders are this
interpreter's), so what travels is one site per sample, not a stack.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from typing import Any, Callable, Mapping

import numpy as np

from perfcore.analysis.codec import Count, Ms

__all__ = [
    "LineCapture",
    "LineFacts",
    "start",
    "take_facts",
    "label_spans",
    "lines_document",
    "trace_arrays",
    "sampler_share",
    "MIN_COUNTED_STEPS",
]

# Steps past warm-up the sync-call counter covers before its cap may end it: calls per step over fewer would
# rest on a handful of steps (a loop making 5,000 calls a step reaches 16k calls in its warm-up).
MIN_COUNTED_STEPS = 32

# The hand-back is measured again this often during a run (each measure 5-16 ms of own work, outside the
# steps: at most ~0.05% of the run), so a machine that gets busier is counted at what a wake-up costs then.
REMEASURE_S = 30.0


Site = tuple[str, str, int]  # a frame as facts carry it: file, function, line


@dataclasses.dataclass(frozen=True)
class CallFacts:
    """The sync-call counter's calls as a part's facts carry them: each call's instant, site and method, the
    sites and method names, and how many past its cap."""

    t_ns: Any
    site: Any
    method: Any
    sites: tuple[Site, ...]
    methods: tuple[str, ...]
    dropped: Count = 0


@dataclasses.dataclass(frozen=True)
class LineFacts:
    """The training thread's samples as a part's facts carry them (LineCapture.facts: plain lists, JSON in a
    raw part), read once where the part is written: each sample's instant, site and whether it is the user's,
    the sites, each sample's library frame inside its site (entry, entries), the sampler's interval and cap,
    samples missed and dropped, and its cost to the thread (held time, wake-ups, hand-back, each wake-up's own
    time and their span). A part from before a figure was kept reads its default."""

    t_ns: Any
    site: Any
    sites: tuple[Site, ...]
    interval_ns: Count
    cap_ns: Count
    missed: Count
    dropped: Count
    sampler_ns: Ms
    user: Any = ()
    prefixes: tuple[str, ...] = ()
    entry: Any = ()
    entries: tuple[Site, ...] = ()
    sampler_held_ns: Ms | None = None
    sampler_wakes: Count = 0
    sampler_sample_ns: Any = None
    sampler_span_ns: Ms = 0.0
    handoff_ns: Ms = 0.0
    native_tid: Count = 0
    calls: CallFacts | None = None


class LineCapture:
    """The sampler and the counter of one training thread, from the first step to the part's writing."""

    def __init__(self, torch: Any, more: Callable[[], bool] | None = None) -> None:
        """Made on the training thread: the one the samples stall, whose hand-back is measured here."""
        from perfcore.capture.line_sampler import DEFAULT_INTERVAL_S, LineSampler, handoff_cost_ns, library_prefixes
        from perfcore.capture.sync_calls import SyncCounter

        self.prefixes = library_prefixes()
        # The OS id the span recorder gives this thread: the trace puts the samples on its track.
        self.native_tid = threading.get_native_id()
        handoff = handoff_cost_ns()
        self.thread_id, self._clock = threading.get_ident(), time.perf_counter_ns
        self.handoff_measures, self._handoff_at = 1 if handoff else 0, self._clock()
        self.sampler = LineSampler(self.thread_id, DEFAULT_INTERVAL_S, handoff_ns=handoff).start()
        self.counter = SyncCounter(torch, prefixes=self.prefixes, more=more).start()

    def remeasure(self) -> bool:
        """On the training thread, at most every REMEASURE_S: the hand-back measured again (5-16 ms of own
        work), so wake-ups after it are counted at what they cost now. Whether it measured."""
        now = self._clock()
        if threading.get_ident() != self.thread_id or now - self._handoff_at < REMEASURE_S * 1e9:
            return False
        from perfcore.capture.line_sampler import handoff_cost_ns

        self.sampler.set_handoff(handoff_cost_ns())
        self.handoff_measures, self._handoff_at = self.handoff_measures + 1, self._clock()
        return True

    def facts(self) -> dict[str, Any]:
        """Stop both and return what the part's writer joins: arrays, lists and numbers (the raw part's JSON
        writes the arrays as lists; LineFacts reads either)."""
        from perfcore.analysis.lines import fold, library_entries

        samples = self.sampler.stop()
        calls = self.counter.stop() if self.counter is not None else None
        site_of, sites, user = fold(samples.stacks, self.prefixes)
        # Where in a library a user's line spent its time (trainer.train(): which of the Trainer's
        # functions): the stacks stay here, so each sample's library frame goes with its site.
        entry_of, entries = library_entries(samples.stacks, self.prefixes)
        out: dict[str, Any] = {
            "prefixes": list(self.prefixes),
            "interval_ns": samples.interval_ns,
            "cap_ns": samples.cap_ns,
            "t_ns": samples.t_ns,
            "site": site_of[samples.stack],
            "sites": [list(f) for f in sites],
            "user": user,
            "entry": entry_of[samples.stack],
            "entries": [list(f) for f in entries],
            "missed": samples.missed,
            "dropped": samples.dropped,
            # What the training thread lost to the sampler (the held GIL and a hand-back per wake-up): the
            # self-report counts it; the held time and the hand-back apart, to say what it is made of.
            "sampler_ns": samples.cost_ns,
            "sampler_held_ns": samples.sampler_ns,
            "sampler_wakes": samples.wakes,
            # Where in the run it was paid: each kept sample's wake-up, and the time all wake-ups spread over.
            "sampler_sample_ns": samples.held_ns if samples.held_ns is not None else np.zeros(0, np.int64),
            "sampler_span_ns": samples.span_ns,
            "handoff_ns": samples.handoff_ns,
            "native_tid": self.native_tid,
        }
        if calls is not None:
            out["calls"] = {
                "t_ns": calls.t_ns,
                "site": calls.site,
                "method": calls.method,
                "sites": [list(f) for f in calls.sites],
                "methods": list(calls.methods),
                "dropped": calls.dropped,
            }
        return out


def start(torch: Any, more: Callable[[], bool] | None = None) -> tuple[LineCapture | None, str | None]:
    """A capture of the calling (training) thread, or None and the one line that says why not. more: asked
    when the sync-call counter reaches its cap, True while too few steps are covered to count calls per step."""
    if not hasattr(sys, "_current_frames"):
        return None, "no host lines: this Python has no sys._current_frames() to sample stacks with"
    try:
        return LineCapture(torch, more=more), None
    except Exception as e:  # never into the script: the run goes on without lines
        return None, f"no host lines ({type(e).__name__}: {e})"


# Wake-ups inside the measured steps below which their cost does not stand for a typical step's: the
# sampler's rate over its whole span stands in (at the 10 ms interval, 10 wake-ups are 0.1 s of steps).
MIN_STEADY_WAKES = 10


def sampler_share(facts: LineFacts | None, start_ns: np.ndarray, end_ns: np.ndarray) -> float | None:
    """The line sampler's cost to the training thread as a share of its time in the steps [start_ns, end_ns):
    each wake-up that fell inside them (its held time and the hand-back) over their summed time. A short run
    whose sampling went mostly to a compile in its warm-up has few there: then the sampler's cost over its
    whole span. None without facts, or from a part written before samples carried their cost."""
    if facts is None or facts.sampler_sample_ns is None:
        return None
    t = np.asarray(facts.t_ns, np.int64)
    held = np.asarray(facts.sampler_sample_ns, np.int64)
    t = t[: len(held)]
    from perfcore.analysis.lines import step_of

    a, b = np.asarray(start_ns, np.int64), np.asarray(end_ns, np.int64)
    if facts.dropped and len(t):  # past the samples' cap (as calls_per_step past the counter's)
        a, b = a[b <= t[-1]], b[b <= t[-1]]
    inside = step_of(t, a, b) >= 0 if len(a) else np.zeros(len(t), bool)
    stepped = float(np.sum(b - a))
    if int(inside.sum()) >= MIN_STEADY_WAKES and stepped > 0:
        return (float(held[inside].sum()) + int(inside.sum()) * facts.handoff_ns) / stepped
    return facts.sampler_ns / facts.sampler_span_ns if facts.sampler_span_ns > 0 else 0.0


def take_facts(capture: LineCapture | None) -> dict[str, Any] | None:
    """The capture's facts, or None (no capture, or one that failed: the part is written without lines)."""
    if capture is None:
        return None
    try:
        return capture.facts()
    except Exception as e:
        sys.stderr.write(f"perfcore: no host lines ({type(e).__name__}: {e})\n")
        return None


def label_spans(engine) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], tuple[str, ...], dict[str, Any]]:
    """The recording's labelled intervals over its kept steps (as attribution takes them), their precedence,
    and which steps those are."""
    from perfcore.analysis.attribution import CPU_PRECEDENCE, OWN, PRECEDENCE
    from perfcore.recording.engine import detail_steps, label_intervals

    intervals = {k: v for k, v in label_intervals(engine).items() if k != OWN}
    return intervals, (PRECEDENCE if engine.device == "cuda" else CPU_PRECEDENCE), detail_steps(engine)


def _frames(sites: tuple[Site, ...]) -> list:
    from perfcore.capture.line_sampler import Frame

    return [Frame(*site) for site in sites]


def _samples(facts: LineFacts):
    from perfcore.capture.line_sampler import LineSamples

    sites = _frames(facts.sites)
    site = np.asarray(facts.site, np.int64)
    stacks: tuple = tuple((s,) for s in sites)
    if len(facts.entry) == len(site) and len(site):
        # Each sample's stack again as its library frame inside its site, so the join finds both.
        entries = _frames(facts.entries)
        pairs, site = np.unique(
            np.stack([site, np.asarray(facts.entry, np.int64)], axis=1), axis=0, return_inverse=True
        )
        stacks = tuple((entries[e], sites[s]) if e >= 0 else (sites[s],) for s, e in pairs.tolist())
    return LineSamples(
        np.asarray(facts.t_ns, np.int64),
        np.asarray(site, np.int32).reshape(-1),
        stacks,
        facts.interval_ns,
        facts.cap_ns,
        0,
        facts.missed,
        facts.dropped,
        int(facts.sampler_ns),
    )


def _calls(facts: CallFacts | None):
    from perfcore.capture.sync_calls import SyncCalls

    if facts is None:
        return None
    return SyncCalls(
        np.asarray(facts.t_ns, np.int64),
        np.asarray(facts.site, np.int32),
        np.asarray(facts.method, np.int8),
        tuple(_frames(facts.sites)),
        facts.methods,
        facts.dropped,
        0,
    )


def lines_document(
    facts: LineFacts | None,
    table,
    full,
    intervals: Mapping[str, tuple[np.ndarray, np.ndarray]],
    precedence: tuple[str, ...],
    kept: Mapping[str, Any],
) -> dict[str, Any]:
    """run.json's "starvation" (from the steps table) and "lines" (from the facts, when sampled): the
    measured steps' [start, end) from `full` (start_ns, wall_ns, perfcore_ns), the rows `table` marks
    warm-up or evaluation left out, each sample labelled by the recording's intervals as attribution labels
    an instant. Only steps whose intervals were kept (`kept`: the recording's detail_steps) are joined."""
    from perfcore.analysis.attribution import measured_mask
    from perfcore.analysis.lines import join_lines
    from perfcore.analysis.starvation import starvation

    out: dict[str, Any] = {"starvation": dataclasses.asdict(starvation(table))}
    if facts is None:
        return out
    measured = measured_mask(table)
    from perfcore.analysis.line_timeline import host_timeline

    s0 = full["start_ns"].to_numpy(np.int64)
    s1 = s0 + full["wall_ns"].to_numpy(np.int64) + full["perfcore_ns"].to_numpy(np.int64)
    n = min(len(measured), len(s0))
    idx = np.arange(n)
    measured = measured[:n] & (
        (idx < int(kept["through"]))
        | np.isin(idx, np.asarray(kept["window"], np.int64))
        | (idx >= int(kept["settled"]))
    )
    samples, prefixes = _samples(facts), facts.prefixes
    a, b = s0[:n][measured], s1[:n][measured]
    result = join_lines(samples, a, b, intervals, prefixes=prefixes, precedence=precedence, calls=_calls(facts.calls))
    numbers = table["step"].to_numpy(np.int64)[:n][measured] if "step" in table else np.flatnonzero(measured)
    timeline = host_timeline(samples, a, b, numbers, intervals, prefixes=prefixes, precedence=precedence)
    steps_total = max(len(s0), 1)
    out["lines"] = {
        **dataclasses.asdict(result),
        "sampler_ms_per_step": facts.sampler_ns / 1e6 / steps_total,
        # What that cost is made of (a part from before they were measured has neither).
        "sampler_held_ms_per_step": (facts.sampler_ns if facts.sampler_held_ns is None else facts.sampler_held_ns)
        / 1e6
        / steps_total,
        "sampler_wakes": facts.sampler_wakes,
        "handoff_us": facts.handoff_ns / 1e3,
        "missed": facts.missed,
        "dropped": facts.dropped,
        "timeline": dataclasses.asdict(timeline) if timeline is not None else None,
    }
    return out


def trace_arrays(facts: LineFacts | None) -> dict[str, np.ndarray]:
    """The samples as trace.npz arrays (fixed-width strings: the reader loads without pickle): each
    sample's instant and site, the sites, and the training thread's OS id. Empty without facts."""
    if facts is None or not len(facts.t_ns):
        return {}
    sites = facts.sites
    return {
        "line_t_ns": np.asarray(facts.t_ns, np.int64),
        "line_site": np.asarray(facts.site, np.int32),
        "line_file": np.array([x[0] for x in sites], dtype=str),
        "line_function": np.array([x[1] for x in sites], dtype=str),
        "line_line": np.array([x[2] for x in sites], dtype=np.int64),
        "line_user": np.asarray(facts.user, dtype=bool),
        "line_tid": np.int64(facts.native_tid),
    }
