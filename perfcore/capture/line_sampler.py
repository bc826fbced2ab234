"""A sampler of one thread's Python stack: which lines of the user's code run, on perfcore's clock.

An in-process thread reads `sys._current_frames()` every `interval_s` and keeps the training
thread's stack, interned: a sample is two numbers (t_ns, stack id). Chosen over py-spy's `record`
(outside the process, no cost in the target) because that needs ptrace permission over the training
process, which containers and Colab often refuse, and a binary perfcore would have to ship; this
works wherever Python runs. Its cost is the GIL: each sample holds it for a walk of the stack, and the
training thread, if it wants the GIL back meanwhile, waits for the walk and for the hand-back (a wake-up of
a blocked thread). Both are measured: the held time at every sample, the hand-back at start on the
calling thread and again during the run (`handoff_ns`, `set_handoff`), so `LineSamples.cost_ns` is what the sampled thread lost. When that cost is
more than `budget` of the wall time (a deep stack, a slow machine), the wait between samples grows until it
is not: the rate adapts, the cost stays bounded, and each sample's weight (the time since the previous one)
follows.

Each sample's time is read right after the frames, on time.perf_counter_ns (CLOCK_MONOTONIC, the
clock of the step table's start_ns), so a sample falls in a step and a label with no alignment.
The thread waits for the GIL while the training thread runs Python, so samples are late, never
early: analysis weights each by the time since the previous one (capped at `cap_ns`).
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import threading
import time
from array import array
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

__all__ = [
    "Frame",
    "LineSamples",
    "LineSampler",
    "code_frame",
    "library_prefixes",
    "is_library",
    "DEFAULT_INTERVAL_S",
    "COST_BUDGET",
    "handoff_cost_ns",
    "sample_stall_ns",
]

# 100 samples a second, py-spy's default: bench/RESULTS.md has its cost on a 5 ms step.
DEFAULT_INTERVAL_S = 0.01
# The share of the sampled thread's time the sampler may cost (held GIL and hand-backs, per sample); over
# it the wait between samples grows. Half a point: the ring's control moves by more than that.
COST_BUDGET = 0.005
MAX_INTERVAL_S = 0.25  # the longest wait the budget can ask for: 4 samples a second still name lines
MAX_DEPTH = 128  # frames kept per sample, innermost first (a deeper stack keeps its innermost 128)
# 200k samples (33 min at the default rate, 4 MiB with each one's held time): what the process keeps stays
# flat however long the run; later samples are counted, not kept.
MAX_SAMPLES = 200_000


class Frame(NamedTuple):
    file: str
    function: str
    line: int


def code_frame(code, line: int | None) -> Frame:
    """A code object and a line of it (None inside a frame being set up: its first line) as a Frame."""
    return Frame(code.co_filename, code.co_name, int(line or code.co_firstlineno))


# perfcore's own package folder (with its separator): a frame under it is perfcore's, wherever it is installed.
OWN_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


def library_prefixes() -> tuple[str, ...]:
    """Folders whose code is not the user's: the standard library, every site-packages (the user's too, and
    a layered environment's on sys.path), perfcore itself; each as given and with links resolved."""
    import site

    paths = sysconfig.get_paths()
    found = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    found.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    found.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else None)
    found.update(p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"))
    found.add(OWN_DIR)
    both = {f(p) for p in found if p for f in (os.path.abspath, os.path.realpath)}
    return tuple(sorted(os.path.join(p, "") for p in both))


def is_library(path: str, prefixes: tuple[str, ...]) -> bool:
    """True for a frame in library code: under one of `prefixes`, any site-/dist-packages, or a frozen
    or built-in module; a script, the user's package and code run from a string are the user's."""
    if path.startswith("<"):
        return path.startswith("<frozen")
    if "site-packages" in path or "dist-packages" in path:
        return True
    return path.startswith(prefixes)


@dataclass(frozen=True)
class LineSamples:
    """What a LineSampler saw: t_ns and stack per sample (columns), each stack its frames innermost first."""

    t_ns: np.ndarray  # int64, perfcore's clock
    stack: np.ndarray  # int32 index into stacks
    stacks: tuple[tuple[Frame, ...], ...]
    interval_ns: int
    cap_ns: int  # the most time one sample stands for (interval + the GIL switch interval)
    thread_id: int
    missed: int  # wake-ups that found no such thread (it had not started, or had ended)
    dropped: int  # samples past MAX_SAMPLES, counted only
    sampler_ns: int  # time the sampler thread held the GIL: from its wake-up to its next wait
    wakes: int = 0  # wake-ups that took the GIL (samples, missed and dropped ones too)
    handoff_ns: int = 0  # what one wake-up costs the sampled thread beyond the held time (mean of its measures)
    # Per sample, the GIL time of the wake-up that took it: the cost lands where the sample does (a compile's
    # deep stacks in the warm-up cost more a wake-up than the steady loop's), so it can be split by step.
    held_ns: np.ndarray | None = None
    span_ns: int = 0  # from the sampler's start to its stop (or to now): the time its wake-ups were spread over

    @property
    def cost_ns(self) -> int:
        """The sampled thread's time lost to the sampler: the GIL held, and a hand-back per wake-up."""
        return int(self.sampler_ns + self.wakes * self.handoff_ns)


class LineSampler:
    """with LineSampler() as s: ...; s.result() -> LineSamples of the main thread (or `thread_id`)."""

    def __init__(
        self,
        thread_id: int | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], int] = time.perf_counter_ns,
        max_samples: int = MAX_SAMPLES,
        budget: float | None = COST_BUDGET,
        handoff_ns: int = 0,
        native: bool = True,
    ):
        if not (0 < interval_s < float("inf")):
            from perfcore.errors import UsageError

            raise UsageError(f"line sampling interval must be a finite number of seconds > 0, got {interval_s}")
        self.thread_id = threading.main_thread().ident if thread_id is None else thread_id
        self.interval_s = float(interval_s)
        self.budget = budget  # None: a fixed rate
        self.handoff_ns = int(handoff_ns)
        # Hand-backs paid at earlier measures of it (set_handoff), and the wake-ups they covered.
        self._handoff_paid_ns = self._handoff_from = 0
        self._clock = clock
        self._max = int(max_samples)
        self._t = array("q")
        self._stack = array("i")
        self._held = array("q")  # per sample, its wake-up's held time
        self._span = [0, 0]  # start, stop (0: still sampling)
        self._ids: dict = {}  # (id(code), lasti, ...), or the extension's bytes of them -> stack id
        self._codes: list[tuple] = []  # per stack id, its (code, lasti) frames: keeps the ids in the keys alive
        self._missed = self._dropped = self._busy_ns = self._wakes = 0
        self._wait_s = self._max_wait_s = self.interval_s
        # The extension's walk, where it has one: a sample then holds the GIL ~20x less (bench/RESULTS.md).
        self._native = _stack_key() if native else None
        self._stop = threading.Lock()  # held while sampling; stop() releases it, which ends the timed wait
        self._thread: threading.Thread | None = None
        self._stopped = False

    def _sample_once(self) -> None:
        frame = sys._current_frames().get(self.thread_id)
        t = self._clock()
        if frame is None:
            self._missed += 1
            return
        if len(self._t) >= self._max:
            self._dropped += 1
            return
        if self._native is not None:
            key, codes = self._native(frame, MAX_DEPTH)  # bytes of (address, offset)s, and the codes
            del frame
            self._append(t, key, codes, None)
            return
        # Keyed by the code's id and the instruction offset: ints hash in nanoseconds where a code object
        # hashes its whole contents, and the line is looked up once per stack (result()), not per sample.
        key: list[int] = []
        codes: list = []
        add, keep = key.append, codes.append
        while frame is not None and len(codes) < MAX_DEPTH:
            code = frame.f_code
            keep(code)
            add(id(code))
            add(frame.f_lasti)
            frame = frame.f_back
        del frame
        self._append(t, tuple(key), codes, key[1::2])

    def _append(self, t: int, key, codes, lastis) -> None:
        sid = self._ids.get(key)
        if sid is None:
            # Interned with its code objects, which stay alive, so no address in a kept key is ever reused.
            sid = self._ids[key] = len(self._codes)
            lastis = array("q", key)[1::2] if lastis is None else lastis  # the extension's (address, offset)s
            self._codes.append(tuple(zip(codes, lastis)))
        self._t.append(t)
        self._stack.append(sid)

    def _next_wait_s(self) -> float:
        """The wait before the next sample: the interval, or longer while the mean cost of a sample
        (held GIL and hand-back) is more than the budget's share of the time between samples."""
        if not self.budget or self._wakes == 0:
            return self.interval_s
        per_wake_ns = self._busy_ns / self._wakes + self.handoff_ns
        return min(max(self.interval_s, per_wake_ns / 1e9 / self.budget), max(MAX_INTERVAL_S, self.interval_s))

    def set_handoff(self, handoff_ns: int) -> None:
        """A new measure of the hand-back (a machine that got busier pays more per wake-up): the wake-ups
        so far keep the one measured before them, the later ones take this."""
        wakes = self._wakes  # the sampler thread counts on; one read, so both lines agree
        self._handoff_paid_ns += (wakes - self._handoff_from) * self.handoff_ns
        self._handoff_from, self.handoff_ns = wakes, int(handoff_ns)

    def _handoff_mean_ns(self, wakes: int) -> int:
        if wakes <= 0:
            return self.handoff_ns
        return round((self._handoff_paid_ns + (wakes - self._handoff_from) * self.handoff_ns) / wakes)

    def _loop(self) -> None:
        stopped, clock = self._stop.acquire, self._clock
        while not stopped(True, self._wait_s):
            t0 = clock()
            try:
                self._sample_once()
            except Exception:  # a frame torn down mid-walk: that one sample is lost, never the run
                self._missed += 1
            self._wakes += 1
            self._wait_s = self._next_wait_s()
            self._max_wait_s = max(self._max_wait_s, self._wait_s)
            held = clock() - t0
            self._busy_ns += held
            if len(self._held) < len(self._t):  # this wake-up kept a sample (not missed nor dropped)
                self._held.append(held)

    def start(self) -> "LineSampler":
        self._span[0] = self._clock()
        self._stop.acquire()
        self._thread = threading.Thread(target=self._loop, name="perfcore-lines", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> LineSamples:
        if self._thread is not None and not self._stopped:
            self._stopped = True
            self._span[1] = self._clock()
            self._stop.release()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        return self.result()

    def __enter__(self) -> "LineSampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def result(self) -> LineSamples:
        """The samples so far, the stacks resolved to (file, function, line)."""
        # Each (code, offset) resolved once.
        frame = functools.lru_cache(maxsize=None)(lambda code, lasti: code_frame(code, line_at(code, lasti)))

        # The lengths first: a sample's stack is interned before it is appended, so every stack id in the
        # first n samples is in the copy of the stacks taken after (the sampler may still be running).
        n = min(len(self._t), len(self._stack), len(self._held))
        stacks = tuple(tuple(frame(c, i) for c, i in codes) for codes in list(self._codes))
        interval_ns, wakes = int(self.interval_s * 1e9), self._wakes
        start, stop = self._span
        return LineSamples(
            np.array(self._t[:n], dtype=np.int64),
            np.array(self._stack[:n], dtype=np.int32),
            stacks,
            interval_ns,
            # A sample stands for at most the longest wait asked for, plus the GIL switch interval it may wait.
            int(self._max_wait_s * 1e9) + int(sys.getswitchinterval() * 1e9),
            int(self.thread_id or 0),
            self._missed,
            self._dropped,
            self._busy_ns,
            wakes,
            self._handoff_mean_ns(wakes),  # each wake-up at the measure of its time: cost_ns sums them
            np.array(self._held[:n], dtype=np.int64),
            max(0, (stop or self._clock()) - start) if start else 0,
        )


def line_at(code, offset: int) -> int | None:
    """The source line of an instruction offset (the f_lineno a frame there would report); None before the
    first instruction or where no line holds it."""
    if offset < 0:
        return None
    if hasattr(code, "co_lines"):
        return next((line for start, end, line in code.co_lines() if start <= offset < end), None)
    import dis  # Python 3.9: the line that starts at or before the offset

    return max(((o, ln) for o, ln in dis.findlinestarts(code) if o <= offset), default=(0, None))[1]


def _stack_key():
    """The extension's walk (Python >= 3.11), or None: the sampler then walks in Python."""
    try:
        from perfcore import _C
    except ImportError:
        return None
    return getattr(_C, "stack_key", None)


def handoff_cost_ns(samples: int = 8, interval_s: float = 0.0005, limit_s: float = 0.1) -> int:
    """What one sample costs the calling thread beyond the sampler's held time, measured here and now: the
    stall a sample causes (below) less the sampler's mean held time. The hand-back: the wake-up of a
    blocked thread, the GIL's hand-over. Never below 0."""
    stall_ns, held_ns = sample_stall_ns(samples, interval_s, limit_s)
    return max(0, int(stall_ns - held_ns))


def sample_stall_ns(samples: int = 8, interval_s: float = 0.0005, limit_s: float = 0.1) -> tuple[float, float]:
    """The calling thread's stall per sample and the sampler's held time per wake-up: this thread turns a
    loop that gives the GIL up at every turn (as torch's calls do) while a sampler reads it `samples` times
    (at most `limit_s`); the median turn that holds a sample, less the median turn. (0, 0) if none did."""
    clock, pause = time.perf_counter_ns, time.sleep
    sampler = LineSampler(threading.get_ident(), interval_s, budget=None)
    reads = array("q")
    end = clock() + int(limit_s * 1e9)
    with sampler:
        while sampler._wakes < samples:
            t = clock()
            reads.append(t)
            if t > end:
                break
            pause(0)  # gives the GIL up and takes it back
    got = sampler.result()
    t = np.frombuffer(reads, np.int64)
    turn = np.searchsorted(t, got.t_ns) - 1  # the gap between two reads each sample fell in
    turn = turn[(turn >= 0) & (turn < len(t) - 1)]
    if not len(turn) or not got.wakes:
        return 0.0, 0.0
    gaps = np.diff(t)
    return float(np.median(gaps[turn]) - np.median(gaps)), got.sampler_ns / got.wakes
