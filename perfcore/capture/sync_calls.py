"""Counts the tensor calls that synchronise the device or leave the model (`.item()`, `.cpu()`,
`.tolist()`, `.numpy()`), each at the user's line that made it, on perfcore's clock.

While armed, those methods of torch.Tensor are replaced by a Python wrapper that appends (t_ns, site,
method) and calls the original; disarming puts back exactly what was there (the class's own entry, or
none: the methods are inherited from torch._C.TensorBase). A wrapper someone else installed over ours
is left in place and ours becomes a pass-through. The site is the innermost frame of the user's code
(library frames, torch's own `.cpu()` calls included, fold into the user's line that led to them);
whether a code object is the user's is decided once per code object. On Python >= 3.11 with perfcore's
clock the wrapper is native (perfcore._C.CountedCall into a SyncLog: no frame of its own, the caller's
(code, offset) looked up in C); the Python wrapper below is the same counter for older Pythons and injected
clocks. Cost per call: bench/bench_lines.py.
"""

from __future__ import annotations

import sys
import threading
import time
from array import array
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from perfcore.capture.line_sampler import Frame, code_frame, is_library, library_prefixes, line_at

__all__ = ["METHODS", "SyncCalls", "SyncCounter"]

METHODS = ("item", "cpu", "tolist", "numpy")
# 16k calls counted, then the wrappers are taken off. What the advice reads from them is per site and method
# the calls in a step (analysis.lines.calls_per_step, over the steps the kept calls cover): loops make the same
# calls each step, so a few dozen steps give those counts (127 steps of a loop making 129 a step), and a long
# run's steady steps then do not pay ~0.1 us a call (+1-2% of a host-heavy step; at 64k the overhead bench's
# short runs were counted throughout). `more` (the caller's: too few steps past warm-up seen yet) raises the
# cap, doubling, up to HARD_MAX_CALLS: a loop of 5,000 calls a step still has its calls counted over whole steps.
MAX_CALLS = 1 << 14
HARD_MAX_CALLS = 1 << 18


@dataclass(frozen=True)
class SyncCalls:
    """Per call: t_ns (perfcore's clock), site (index into sites) and method (index into METHODS)."""

    t_ns: np.ndarray
    site: np.ndarray
    method: np.ndarray
    sites: tuple[Frame, ...]
    methods: tuple[str, ...]
    dropped: int  # 1 once the cap was reached and counting stopped there (calls after it were not seen), else 0
    thread_id: int


class SyncCounter:
    """with SyncCounter(torch) as c: ...; c.result() -> SyncCalls. Only calls on `thread_id` (default:
    the thread that arms it) are counted; the wrapper is armed for the process, so keep it short-lived."""

    def __init__(
        self,
        torch: Any,
        methods: tuple[str, ...] = METHODS,
        clock: Callable[[], int] = time.perf_counter_ns,
        max_calls: int = MAX_CALLS,
        prefixes: tuple[str, ...] | None = None,
        more: Callable[[], bool] | None = None,
    ):
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            raise ValueError(f"cannot count {unknown}; counted methods are {METHODS}")
        self._tensor = torch.Tensor
        self.methods = tuple(methods)
        self._clock = clock
        self._max = int(max_calls)
        self._more = more  # at the cap: True while more calls are wanted (the cap then doubles)
        self._prefixes = library_prefixes() if prefixes is None else prefixes
        self._t = array("q")
        self._site = array("i")
        self._sites: dict[tuple[Any, int], int] = {}  # (code, instruction offset) of a user frame -> site id
        # (id(code), offset) of a caller that is itself that user frame -> site id. By id: a code object's
        # hash is computed from its contents on every call (~0.5 us); _sites holds the code, so the id stays its.
        self._direct: dict[tuple[int, int], int] = {}
        self._user: dict[Any, bool] = {}  # code -> is the user's
        self._saved: dict[str, Any] = {}
        self._wrappers: dict[str, Any] = {}
        self._on = [False]  # a cell the wrappers read: armed
        self._dropped = 0
        self.thread_id = 0
        self._log = None  # the native SyncLog while one counts (see _native)
        self._native = clock is time.perf_counter_ns and _native_types() is not None
        # Where the cap took the wrappers off, in the run's steps: `steps_now` (set by whoever counts steps)
        # read then; -1 while counting, or with no step count.
        self.steps_now: Callable[[], int] | None = None
        self.full_at_step = -1

    def _native_slow(self, frame, caller: tuple[int, int]) -> int:
        # The native log's first call from a caller: the site, kept there (>= 0) when the caller is
        # the user's frame itself, else -(sid + 1) (a library caller: resolved on every call, as here).
        direct = self._direct
        sid = direct.get(caller)
        if sid is None:
            sid = self._site_of(frame, caller)
        return sid if caller in direct else -(sid + 1)

    def _raise_cap(self) -> bool:
        """At the cap: doubles it (up to HARD_MAX_CALLS) while `more` says too few steps are covered yet."""
        if self._more is None or self._max >= HARD_MAX_CALLS:
            return False
        try:
            wanted = bool(self._more())
        except Exception:  # the caller's question failed: counting ends at the cap, as without one
            return False
        if wanted:
            self._max = min(2 * self._max, HARD_MAX_CALLS)
            if self._log is not None:
                self._log.cap = self._max
        return wanted

    def _full(self) -> None:
        if self._raise_cap():
            return
        self._dropped = 1
        if self.steps_now is not None and self.full_at_step < 0:
            self.full_at_step = int(self.steps_now())
        self._off()

    def _site_of(self, frame, caller: tuple[int, int]) -> int:
        # The first call from a (code, instruction): walk out to the user's frame once. A caller that is
        # the user's own code always maps to itself, so later calls from it skip the walk (the fast path).
        user = self._user
        f = frame
        while f is not None:
            code = f.f_code
            mine = user.get(code)
            if mine is None:
                mine = user[code] = not is_library(code.co_filename, self._prefixes)
            if mine:
                break
            f = f.f_back
        if f is None:  # no user frame: the innermost caller stands for the call
            f = frame
        key = (f.f_code, f.f_lasti)
        sid = self._sites.get(key)
        if sid is None:
            sid = self._sites[key] = len(self._sites)
        if f is frame:
            self._direct[caller] = sid
        return sid

    def _wrap(self, index: int, original: Any):
        # The hot path: a thread check, one frame, one dict lookup, two appends (site and method share one
        # int). The instruction offset, not the line, keys a site: f_lineno costs a line-table search per call.
        record_t, record_site, direct = self._t.append, self._site.append, self._direct
        clock, getframe, get_ident = self._clock, sys._getframe, threading.get_ident
        armed, tid = self._on, self.thread_id
        slow, kept, cap = self._site_of, self._t, self._max

        def counted(tensor, *args, **kwargs):
            nonlocal cap
            if armed[0] and get_ident() == tid:
                if len(kept) >= cap:  # the cap raised while more steps are wanted, else counting ends here
                    self._full()
                    cap = self._max
                if len(kept) < cap:
                    f = getframe(1)
                    caller = (id(f.f_code), f.f_lasti)
                    sid = direct.get(caller)
                    if sid is None:
                        sid = slow(f, caller)
                    record_t(clock())
                    record_site(sid * 8 + index)
            return original(tensor, *args, **kwargs)

        counted.__name__ = counted.__qualname__ = original.__name__
        counted.__doc__ = original.__doc__
        counted.__wrapped__ = original
        return counted

    def start(self) -> "SyncCounter":
        self.thread_id = threading.get_ident()
        wrap = self._wrap
        if self._native:
            log_type, counted = _native_types()
            if self._log is None:  # armed again after a stop: the calls so far stay, as the Python wrapper's do
                self._log = log_type(self._native_slow, self._full, self._max, self.thread_id)
            wrap = lambda index, original: counted(original, self._log, index)  # noqa: E731
        for name in self.methods:
            self._saved[name] = self._tensor.__dict__.get(name)
            index = METHODS.index(name)
            setattr(self._tensor, name, self._wrappers.setdefault(name, wrap(index, getattr(self._tensor, name))))
        self._on[0] = True
        if self._log is not None:
            self._log.armed = True
        return self

    def stop(self) -> SyncCalls:
        self._off()
        return self.result()

    def _off(self) -> None:
        """Disarm and put back what was there (the wrapper may call this on itself: it then passes its
        call on to the method it saved)."""
        self._on[0] = False
        if self._log is not None:
            self._log.armed = False
        for name, wrapper in self._wrappers.items():
            if self._tensor.__dict__.get(name) is not wrapper:
                continue  # someone wrapped ours: theirs stays, ours now only passes calls through
            if self._saved[name] is None:
                delattr(self._tensor, name)
            else:
                setattr(self._tensor, name, self._saved[name])
        self._wrappers.clear()

    def __enter__(self) -> "SyncCounter":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def calls_seen(self) -> int:
        """Calls counted on the armed thread so far (each paid the wrapper; the cap's one more too)."""
        return (len(self._log) if self._log is not None else len(self._t)) + self._dropped

    @staticmethod
    def call_cost_ns(calls: int = 1000, blocks: int = 5, torch: Any = None) -> float:
        """What the counter adds to one counted call on this machine now (a median over `blocks` blocks).
        With `torch`: `.item()` on real tensors inside a loop that indexes and compares them, as a
        host-heavy step's per-sample metrics do, counted against not on this thread's CPU time; that is
        what a run's counted calls cost (~100 ns a call where the bare wrapper costs ~40: the tensor's
        method and the loop's other work around it lose more than a method that does nothing). Call it
        only while no counter of the run is armed. Without: `obj.item()` on a C method, as torch's are,
        from a frame marked the user's (the wrapper alone)."""
        if torch is not None:
            return _tensor_call_cost_ns(torch, calls, blocks)

        class Host(int):
            item = int.bit_length  # a C method descriptor taking no argument, like Tensor.item

        counter = SyncCounter(SimpleNamespace(Tensor=Host), methods=("item",), prefixes=(), max_calls=1 << 30)
        obj, now = Host(5), time.perf_counter_ns
        counter._user[sys._getframe().f_code] = True  # this frame stands for the user's line
        per = []
        for _ in range(blocks):
            counter.start()
            t0 = now()
            for _ in range(calls):
                obj.item()
            t1 = now()
            counter.stop()
            t2 = now()
            for _ in range(calls):
                obj.item()
            per.append(((t1 - t0) - (now() - t2)) / calls)
        return max(0.0, float(np.median(per)))

    def result(self) -> SyncCalls:
        """The calls so far; sites resolved to (file, function, line), one site per line."""
        frames: dict[Frame, int] = {}
        remap = np.zeros(len(self._sites), dtype=np.int32)
        for (code, offset), sid in list(self._sites.items()):
            remap[sid] = frames.setdefault(code_frame(code, line_at(code, offset)), len(frames))
        if self._log is not None:
            t_bytes, site_bytes = self._log.columns()
            t_ns, packed = np.frombuffer(t_bytes, np.int64), np.frombuffer(site_bytes, np.int32).astype(np.int64)
        else:
            n = min(len(self._t), len(self._site))
            t_ns, packed = np.array(self._t[:n], dtype=np.int64), np.array(self._site[:n], dtype=np.int64)
        return SyncCalls(
            t_ns,
            remap[packed >> 3],
            (packed & 7).astype(np.int8),
            tuple(frames),
            METHODS,
            self._dropped,
            int(self.thread_id),
        )


def _tensor_call_cost_ns(torch: Any, calls: int, blocks: int) -> float:
    # Per block: `calls` counted .item() calls on real tensors (two a sample, as in per-sample metrics),
    # then as many uncounted; thread CPU time, so other processes on the core do not land in one half.
    n = 64
    # On the CPU whatever the script made the default device: under torch.set_default_device("cuda")
    # these would be GPU tensors, and each .item() a synchronising copy (thousands at the run's end).
    cpu = torch.device("cpu")
    a = torch.zeros(n, dtype=torch.long, device=cpu)
    b = torch.ones(n, dtype=torch.long, device=cpu)
    out = torch.zeros(n, 2, device=cpu)
    counter = SyncCounter(torch, methods=("item",), prefixes=(), max_calls=1 << 30)

    def metrics() -> float:
        s = 0.0
        for i in range(n):
            s += int((a[i] == b[i]).item())
            s += out[i, a[i]].item()
        return s

    counter._user[metrics.__code__] = True  # its lines stand for the user's
    # Many short pairs (about 0.7 ms each), counted and uncounted in alternating order, and the median of
    # their differences: the difference is a few per cent of a pair, so a long block that a preemption,
    # a stolen tick or another process's cache traffic lands in once decided the whole figure (under
    # load nine 5 ms blocks gave medians from 0 to 3x the loop's own cost); a short pair is hit rarely,
    # and the order alternates so that the half that runs second (on warmer caches) biases neither way.
    now, per = time.thread_time_ns, []
    rounds = max(1, calls // (16 * n))
    for i in range(max(8, blocks * 8)):
        counted = uncounted = 0
        for half in (i % 2, 1 - i % 2):
            if half:
                counter.start()
            t0 = now()
            for _ in range(rounds):
                metrics()
            t = now() - t0
            if half:
                counter.stop()
                counted = t
            else:
                uncounted = t
        per.append((counted - uncounted) / (rounds * 2 * n))
    return max(0.0, float(np.median(per)))


def _native_types():
    """(SyncLog, CountedCall) from the extension, or None (Python < 3.11, or an extension without them)."""
    try:
        from perfcore import _C
    except ImportError:
        return None
    log_type, counted = getattr(_C, "SyncLog", None), getattr(_C, "CountedCall", None)
    return (log_type, counted) if log_type is not None and counted is not None else None
