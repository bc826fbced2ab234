"""Counts the tensor calls that synchronise the device or leave the model (`.item()`, `.cpu()`,
`.tolist()`, `.numpy()`), each at the user's line that made it, on perfcore's clock.

While armed, those methods of torch.Tensor are replaced by a Python wrapper that appends (t_ns, site,
method) and calls the original; disarming puts back exactly what was there (the class's own entry, or
none: the methods are inherited from torch._C.TensorBase). A wrapper someone else installed over ours
is left in place and ours becomes a pass-through. The site is the innermost frame of the user's code
(library frames, torch's own `.cpu()` calls included, fold into the user's line that led to them);
whether a code object is the user's is decided once per code object. Cost per call: bench/bench_lines.py.
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

from perfcore.capture.line_sampler import Frame, code_frame, is_library, library_prefixes

__all__ = ["METHODS", "SyncCalls", "SyncCounter"]

METHODS = ("item", "cpu", "tolist", "numpy")
# 64k calls counted (~330 steps of a loop making 200 a step), then the wrappers are taken off: a counted call
# costs 1-5 us inside a host-heavy loop (+25-40% on a 1.6 ms step making 129; bench/RESULTS.md), and calls per
# step are as well known from the steps the kept calls cover, over which they are then taken.
MAX_CALLS = 1 << 16


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
    ):
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            raise ValueError(f"cannot count {unknown}; counted methods are {METHODS}")
        self._tensor = torch.Tensor
        self.methods = tuple(methods)
        self._clock = clock
        self._max = int(max_calls)
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
            if armed[0] and get_ident() == tid:
                if len(kept) < cap:
                    f = getframe(1)
                    caller = (id(f.f_code), f.f_lasti)
                    sid = direct.get(caller)
                    if sid is None:
                        sid = slow(f, caller)
                    record_t(clock())
                    record_site(sid * 8 + index)
                else:  # enough seen: later calls go straight to torch
                    self._dropped = 1
                    self._off()
            return original(tensor, *args, **kwargs)

        counted.__name__ = counted.__qualname__ = original.__name__
        counted.__doc__ = original.__doc__
        counted.__wrapped__ = original
        return counted

    def start(self) -> "SyncCounter":
        self.thread_id = threading.get_ident()
        for name in self.methods:
            own = self._tensor.__dict__.get(name)
            self._saved[name] = own
            wrapper = self._wrappers[name] = self._wrap(METHODS.index(name), getattr(self._tensor, name))
            setattr(self._tensor, name, wrapper)
        self._on[0] = True
        return self

    def stop(self) -> SyncCalls:
        self._off()
        return self.result()

    def _off(self) -> None:
        """Disarm and put back what was there (the wrapper may call this on itself: it then passes its
        call on to the method it saved)."""
        self._on[0] = False
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
        return len(self._t) + self._dropped

    @staticmethod
    def call_cost_ns(calls: int = 1000, blocks: int = 5) -> float:
        """What the wrapper adds to one counted call on this machine now (median of `blocks` blocks of
        `calls`): the same wrapper around a method that does nothing, against that method alone, called
        from a frame marked the user's (the fast path every repeated call takes)."""

        class Host:
            def item(self):
                return 0

        counter = SyncCounter(SimpleNamespace(Tensor=Host), methods=("item",), prefixes=())
        plain = Host.item
        counter.start()
        counted, obj, now = Host.item, Host(), time.perf_counter_ns
        counter._user[sys._getframe().f_code] = True  # this frame stands for the user's line
        per = []
        for _ in range(blocks):
            t0 = now()
            for _ in range(calls):
                counted(obj)
            t1 = now()
            for _ in range(calls):
                plain(obj)
            per.append(((t1 - t0) - (now() - t1)) / calls)
        counter.stop()
        return max(0.0, float(np.median(per)))

    def result(self) -> SyncCalls:
        """The calls so far; sites resolved to (file, function, line), one site per line."""
        frames: dict[Frame, int] = {}
        remap = np.zeros(len(self._sites), dtype=np.int32)
        for (code, offset), sid in list(self._sites.items()):
            remap[sid] = frames.setdefault(code_frame(code, _line_at(code, offset)), len(frames))
        n = min(len(self._t), len(self._site))
        packed = np.array(self._site[:n], dtype=np.int64)
        return SyncCalls(
            np.array(self._t[:n], dtype=np.int64),
            remap[packed >> 3],
            (packed & 7).astype(np.int8),
            tuple(frames),
            METHODS,
            self._dropped,
            int(self.thread_id),
        )


def _line_at(code, offset: int) -> int | None:
    # The source line of an instruction offset (the f_lineno a frame there would report).
    for start, end, line in code.co_lines():
        if start <= offset < end:
            return line
    return None
