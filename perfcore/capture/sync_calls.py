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
from typing import Any, Callable

import numpy as np

from perfcore.capture.line_sampler import Frame, code_frame, is_library, library_prefixes

__all__ = ["METHODS", "SyncCalls", "SyncCounter"]

METHODS = ("item", "cpu", "tolist", "numpy")
MAX_CALLS = 1 << 23  # 8M calls kept (96 MiB); later ones are counted per site and method only
_NO_SITE = Frame("?", "?", 0)


@dataclass(frozen=True)
class SyncCalls:
    """Per call: t_ns (perfcore's clock), site (index into sites) and method (index into METHODS)."""
    t_ns: np.ndarray
    site: np.ndarray
    method: np.ndarray
    sites: tuple[Frame, ...]
    methods: tuple[str, ...]
    dropped: int  # calls past MAX_CALLS, not kept
    thread_id: int


class SyncCounter:
    """with SyncCounter(torch) as c: ...; c.result() -> SyncCalls. Only calls on `thread_id` (default:
    the thread that arms it) are counted; the wrapper is armed for the process, so keep it short-lived."""

    def __init__(self, torch: Any, methods: tuple[str, ...] = METHODS, clock: Callable[[], int] = time.perf_counter_ns,
                 max_calls: int = MAX_CALLS, prefixes: tuple[str, ...] | None = None):
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
        self._method = array("b")
        self._sites: dict[tuple[Any, int], int] = {}  # (code, line) -> site id
        self._user: dict[Any, bool] = {}  # code -> is the user's
        self._saved: dict[str, Any] = {}
        self._wrappers: dict[str, Any] = {}
        self._armed = False
        self._dropped = 0
        self.thread_id = 0

    def _site_of(self, frame) -> int:
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
        key = (f.f_code, f.f_lineno)
        sid = self._sites.get(key)
        if sid is None:
            sid = self._sites[key] = len(self._sites)
        return sid

    def _wrap(self, index: int, original: Any):
        record_t, record_site, record_method = self._t.append, self._site.append, self._method.append
        clock, getframe, get_ident = self._clock, sys._getframe, threading.get_ident

        def counted(tensor, *args, **kwargs):
            if self._armed and get_ident() == self.thread_id:
                if len(self._t) < self._max:
                    record_t(clock())
                    record_site(self._site_of(getframe(1)))
                    record_method(index)
                else:
                    self._dropped += 1
            return original(tensor, *args, **kwargs)

        counted.__name__ = counted.__qualname__ = original.__name__
        counted.__doc__ = original.__doc__
        counted.__wrapped__ = original
        return counted

    def start(self) -> "SyncCounter":
        self.thread_id = threading.get_ident()
        for i, name in enumerate(self.methods):
            own = self._tensor.__dict__.get(name)
            self._saved[name] = own
            wrapper = self._wrappers[name] = self._wrap(METHODS.index(name), getattr(self._tensor, name))
            setattr(self._tensor, name, wrapper)
        self._armed = True
        return self

    def stop(self) -> SyncCalls:
        self._armed = False
        for name, wrapper in self._wrappers.items():
            if self._tensor.__dict__.get(name) is not wrapper:
                continue  # someone wrapped ours: theirs stays, ours now only passes calls through
            if self._saved[name] is None:
                delattr(self._tensor, name)
            else:
                setattr(self._tensor, name, self._saved[name])
        self._wrappers.clear()
        return self.result()

    def __enter__(self) -> "SyncCounter":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def result(self) -> SyncCalls:
        sites = [_NO_SITE] * len(self._sites)
        for (code, line), sid in list(self._sites.items()):
            sites[sid] = code_frame(code, line)
        n = min(len(self._t), len(self._site), len(self._method))
        return SyncCalls(np.array(self._t[:n], dtype=np.int64), np.array(self._site[:n], dtype=np.int32),
                         np.array(self._method[:n], dtype=np.int8), tuple(sites), METHODS, self._dropped,
                         int(self.thread_id))
