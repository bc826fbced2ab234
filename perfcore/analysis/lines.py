"""Samples of the training thread's stack joined to steps and labels: which of the user's lines and
functions held each label's time, in ms per step with a share. Pure functions on arrays; no I/O.

A sample stands for the time since the one before it (capped at the sampler's cap_ns: a sampler
that could not run for a while says nothing about that while). It belongs to the step whose
[start, end) holds its instant and to the label whose interval covers that instant (precedence as
in attribution; host where none does). Its stack is folded to the innermost frame of the user's
code: torch, the standard library, site-packages and perfcore are where the user's line spent its
time, not lines the user can change. A stack with no user frame keeps its innermost frame, marked
user=False.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import math

import numpy as np

from perfcore.analysis.attribution import CPU_PRECEDENCE, LABELS
from perfcore.analysis.codec import Frac, Ms
from perfcore.capture.line_sampler import Frame, LineSamples, is_library
from perfcore.capture.sync_calls import SyncCalls

__all__ = [
    "LineCost",
    "FunctionCost",
    "LabelLines",
    "HostLines",
    "SiteCalls",
    "fold",
    "label_at",
    "sample_weights",
    "step_of",
    "library_entries",
    "package_of",
    "calls_per_step",
    "join_lines",
    "REPORT_ORDER",
    "SHARE_Z",
    "SHARE_REL",
    "MIN_SAMPLES",
    "min_samples",
    "enough_samples",
]

REPORT_ORDER = ("host", "load", "compute", "transfer", "comm")  # host first: the label lines explain best

# A share p read from n samples has standard error sqrt(p(1-p)/n). A site's time is given in ms only when
# its interval of SHARE_Z standard errors lies within SHARE_REL of the share either side, that is when
# n >= SHARE_Z^2 (1-p) / (p SHARE_REL^2). Near p = 1 that bound falls to 0 samples, so a floor: with all
# n samples on one site its true share is only known to be above 1 - 3/n (95%, the rule of three),
# which is within SHARE_REL of it from n = 3 / SHARE_REL on.
SHARE_Z = 2.0
SHARE_REL = 0.5
MIN_SAMPLES = math.ceil(3 / SHARE_REL)


def min_samples(share: float) -> int:
    """The label's samples needed before a site holding `share` of them can be given a time."""
    if not share > 0:
        return 2**62  # a site with no time is never sized
    need = SHARE_Z**2 * (1.0 - min(share, 1.0)) / (share * SHARE_REL**2)
    return max(MIN_SAMPLES, math.ceil(need - 1e-9))


def enough_samples(share: float, samples: int) -> bool:
    return int(samples) >= min_samples(float(share))


@dataclass(frozen=True)
class SiteCalls:
    """Counted calls of one method at one of the user's lines, per measured step."""

    file: str
    function: str
    line: int
    method: str
    per_step: Ms
    total: int


@dataclass(frozen=True)
class LineCost:
    file: str
    function: str
    line: int
    ms_per_step: Ms
    share: Frac  # of the label's sampled time
    samples: int
    user: bool
    calls: tuple[SiteCalls, ...] = ()  # synchronising calls counted at this line
    # Where in the library it called this line spent most of its time (file, function, line: the deepest
    # frame of that library's package), with that share of the line's time, where more than half of it was
    # inside library code: a line that holds a label's whole time because it calls into a library
    # (trainer.train()) is named with where the time went.
    inside: tuple[str, str, int] | None = None
    inside_share: float | None = None


@dataclass(frozen=True)
class FunctionCost:
    file: str
    function: str
    line: int  # its line that held the most time
    ms_per_step: Ms
    share: Frac
    samples: int
    user: bool


@dataclass(frozen=True)
class LabelLines:
    label: str
    ms_per_step: Ms  # the label's time as the samples see it
    samples: int
    lines: tuple[LineCost, ...]  # most time first, at most `top`
    functions: tuple[FunctionCost, ...]


@dataclass(frozen=True)
class HostLines:
    steps: int
    samples: int  # samples inside the steps
    interval_ms: float
    labels: tuple[LabelLines, ...]  # REPORT_ORDER, labels with no sample left out

    def label(self, name: str) -> LabelLines | None:
        return next((lb for lb in self.labels if lb.label == name), None)


def fold(
    stacks: tuple[tuple[Frame, ...], ...], prefixes: tuple[str, ...]
) -> tuple[np.ndarray, tuple[Frame, ...], np.ndarray]:
    """Per stack (frames innermost first): the index of its site in the returned sites, and per site
    whether it is the user's (the innermost user frame) or a stand-in (the innermost frame)."""
    index: dict[Frame, int] = {}
    users: list[bool] = []
    site_of = np.zeros(len(stacks), dtype=np.int64)
    for i, frames in enumerate(stacks):
        site = next((f for f in frames if not is_library(f.file, prefixes)), None)
        user = site is not None
        site = site if user else (frames[0] if frames else Frame("?", "?", 0))
        if site not in index:
            index[site] = len(index)
            users.append(user)
        site_of[i] = index[site]
    return site_of, tuple(index), np.array(users, dtype=bool)


def library_entries(
    stacks: tuple[tuple[Frame, ...], ...], prefixes: tuple[str, ...]
) -> tuple[np.ndarray, tuple[Frame, ...]]:
    """Per stack (frames innermost first), the index in the returned frames of where its user site's time
    went inside the library it called: the deepest frame of the called library's own package (a Trainer's
    _maybe_log_save_evaluate, not train() that holds everything, nor torch below it); -1 where the site
    ran its own code."""
    index: dict[Frame, int] = {}
    entry_of = np.full(len(stacks), -1, dtype=np.int64)
    for i, frames in enumerate(stacks):
        j = next((k for k, f in enumerate(frames) if not is_library(f.file, prefixes)), None)
        if j:  # a user frame with a library frame inside it
            pkg = package_of(frames[j - 1].file)
            deepest = next(f for f in frames[:j] if package_of(f.file) == pkg)
            entry_of[i] = index.setdefault(deepest, len(index))
    return entry_of, tuple(index)


def package_of(file: str) -> str:
    """The top-level package a library file belongs to (the folder under site-packages), else its folder."""
    parts = str(file).replace("\\", "/").split("/")
    at = max((i for i, p in enumerate(parts) if p in ("site-packages", "dist-packages")), default=None)
    if at is not None and at + 1 < len(parts):
        return parts[at + 1].removesuffix(".py")
    return "/".join(parts[:-1])


def _inside(
    entry: np.ndarray, w: np.ndarray, frames: tuple[Frame, ...]
) -> tuple[tuple[str, str, int] | None, float | None]:
    """The library call that held most of one site's weight `w`, and its share, where library calls held
    more than half of it."""
    total = float(w.sum())
    lib = entry >= 0
    if not total or float(w[lib].sum()) <= total / 2:
        return None, None
    by = np.bincount(entry[lib], weights=w[lib], minlength=len(frames))
    top = int(np.argmax(by))
    f = frames[top]
    return (f.file, f.function, int(f.line)), float(by[top]) / total


def _covered(t: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # An instant is covered when more [a, b) intervals have begun than ended by it (overlaps allowed).
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    keep = b > a
    begun = np.searchsorted(np.sort(a[keep]), t, side="right")
    ended = np.searchsorted(np.sort(b[keep]), t, side="right")
    return begun > ended


def label_at(
    t_ns: np.ndarray,
    intervals: Mapping[str, tuple[np.ndarray, np.ndarray]],
    precedence: tuple[str, ...] = CPU_PRECEDENCE,
) -> np.ndarray:
    """The LABELS index of each instant: the highest-precedence label whose interval covers it, else host."""
    t = np.asarray(t_ns, np.int64)
    out = np.full(len(t), LABELS.index("host"), dtype=np.int64)
    for label in reversed(precedence):  # lowest first, so higher ones overwrite
        if label in intervals:
            out[_covered(t, *intervals[label])] = LABELS.index(label)
    return out


def sample_weights(t_ns: np.ndarray, interval_ns: int, cap_ns: int) -> np.ndarray:
    """ns each sample stands for: the time since the previous sample (the first: one interval), capped."""
    t = np.asarray(t_ns, np.int64)
    if len(t) == 0:
        return np.zeros(0, np.int64)
    dt = np.diff(t, prepend=t[0] - int(interval_ns))
    return np.clip(dt, 0, int(cap_ns))


def step_of(t: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> np.ndarray:
    k = np.searchsorted(s0, t, side="right") - 1
    ok = k >= 0
    ok[ok] = t[ok] < s1[k[ok]]
    return np.where(ok, k, -1)


def calls_per_step(calls: SyncCalls, step_start_ns: np.ndarray, step_end_ns: np.ndarray) -> tuple[SiteCalls, ...]:
    """Counted calls inside the steps, per site and method, most first. When calls were dropped (past the
    counter's cap), only the steps that end by the last kept call count."""
    s0, s1 = np.asarray(step_start_ns, np.int64), np.asarray(step_end_ns, np.int64)
    if calls.dropped and len(calls.t_ns):
        covered = s1 <= calls.t_ns[-1]
        s0, s1 = s0[covered], s1[covered]
    if len(s0) == 0 or len(calls.t_ns) == 0:
        return ()
    inside = step_of(calls.t_ns, s0, s1) >= 0
    m = len(calls.methods)
    counts = np.bincount(calls.site[inside].astype(np.int64) * m + calls.method[inside], minlength=len(calls.sites) * m)
    out = [
        SiteCalls(
            calls.sites[k // m].file,
            calls.sites[k // m].function,
            calls.sites[k // m].line,
            calls.methods[k % m],
            float(counts[k]) / len(s0),
            int(counts[k]),
        )
        for k in np.flatnonzero(counts)
    ]
    return tuple(sorted(out, key=lambda c: -c.total))


def join_lines(
    samples: LineSamples,
    step_start_ns: np.ndarray,
    step_end_ns: np.ndarray,
    intervals: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    *,
    prefixes: tuple[str, ...],
    precedence: tuple[str, ...] = CPU_PRECEDENCE,
    calls: SyncCalls | None = None,
    top: int = 10,
) -> HostLines:
    """Per label, the user's lines and functions that held its time over the given steps (ordered,
    non-overlapping [start, end): pass the measured steps only, not warm-up or evaluation). When samples
    were dropped (past the sampler's cap), only the steps that end by the last kept sample count."""
    s0, s1 = np.asarray(step_start_ns, np.int64), np.asarray(step_end_ns, np.int64)
    if samples.dropped and len(samples.t_ns):
        covered = s1 <= samples.t_ns[-1]
        s0, s1 = s0[covered], s1[covered]
    n_steps = len(s0)
    interval_ms = samples.interval_ns / 1e6
    if n_steps == 0 or len(samples.t_ns) == 0:
        return HostLines(n_steps, 0, interval_ms, ())
    weight = sample_weights(samples.t_ns, samples.interval_ns, samples.cap_ns)
    inside = step_of(samples.t_ns, s0, s1) >= 0
    t, w = samples.t_ns[inside], weight[inside]
    site_of, sites, user = fold(samples.stacks, prefixes)
    site = site_of[samples.stack[inside]]
    entry_of, entry_frames = library_entries(samples.stacks, prefixes)
    entry = entry_of[samples.stack[inside]]
    label = label_at(t, intervals or {}, precedence)
    per_site_calls: dict[tuple[str, int], list[SiteCalls]] = {}
    for c in calls_per_step(calls, s0, s1) if calls is not None else ():
        per_site_calls.setdefault((c.file, c.line), []).append(c)
    out = []
    for name in REPORT_ORDER:
        mine = label == LABELS.index(name)
        if not mine.any():
            continue
        total_ns = float(w[mine].sum())
        ns = np.bincount(site[mine], weights=w[mine], minlength=len(sites))
        count = np.bincount(site[mine], minlength=len(sites))
        hot = [k for k in np.argsort(-ns, kind="stable") if count[k]]
        lines = tuple(
            LineCost(
                sites[k].file,
                sites[k].function,
                sites[k].line,
                float(ns[k]) / 1e6 / n_steps,
                float(ns[k]) / total_ns if total_ns else 0.0,
                int(count[k]),
                bool(user[k]),
                tuple(per_site_calls.get((sites[k].file, sites[k].line), ())),
                *(_inside(entry[at], w[at], entry_frames) if user[k] else (None, None)),
            )
            for k in hot[:top]
            for at in [mine & (site == k)]
        )
        out.append(
            LabelLines(
                name,
                total_ns / 1e6 / n_steps,
                int(mine.sum()),
                lines,
                _functions(sites, user, ns, count, hot, total_ns, n_steps, top),
            )
        )
    return HostLines(n_steps, int(inside.sum()), interval_ms, tuple(out))


def _functions(sites, user, ns, count, hot, total_ns: float, n_steps: int, top: int) -> tuple[FunctionCost, ...]:
    # A function's time is its lines' time; `hot` is already most first, so a function's first line is its hottest.
    acc: dict[tuple[str, str], list] = {}
    for k in hot:
        key = (sites[k].file, sites[k].function)
        if key not in acc:
            acc[key] = [sites[k].line, 0.0, 0, bool(user[k])]
        acc[key][1] += float(ns[k])
        acc[key][2] += int(count[k])
    ranked = sorted(acc.items(), key=lambda kv: -kv[1][1])[:top]
    return tuple(
        FunctionCost(f, fn, line, v / 1e6 / n_steps, v / total_ns if total_ns else 0.0, c, u)
        for (f, fn), (line, v, c, u) in ranked
    )
