"""A sampler of one thread's Python stack: which lines of the user's code run, on perfcore's clock.

An in-process thread reads `sys._current_frames()` every `interval_s` and keeps the training
thread's stack, interned: a sample is two numbers (t_ns, stack id). Chosen over py-spy's `record`
(outside the process, no cost in the target) because that needs ptrace permission over the training
process, which containers and Colab often refuse, and a binary perfcore would have to ship; this
works wherever Python runs. Its cost is the GIL it takes for a few microseconds per sample, measured
side by side in bench/bench_lines.py.

Each sample's time is read right after the frames, on time.perf_counter_ns (CLOCK_MONOTONIC, the
clock of the step table's start_ns), so a sample falls in a step and a label with no alignment.
The thread waits for the GIL while the training thread runs Python, so samples are late, never
early: analysis weights each by the time since the previous one (capped at `cap_ns`).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time
from array import array
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

__all__ = ["Frame", "LineSamples", "LineSampler", "code_frame", "library_prefixes", "is_library", "DEFAULT_INTERVAL_S"]

# 100 samples a second, py-spy's default: bench/RESULTS.md has its cost on a 5 ms step.
DEFAULT_INTERVAL_S = 0.01
MAX_DEPTH = 128  # frames kept per sample, innermost first (a deeper stack keeps its innermost 128)
# 200k samples (33 min at the default rate, 2.4 MiB): what the process keeps stays flat however long the
# run; later samples are counted, not kept.
MAX_SAMPLES = 200_000


class Frame(NamedTuple):
    file: str
    function: str
    line: int


def code_frame(code, line: int | None) -> Frame:
    """A code object and a line of it (None inside a frame being set up: its first line) as a Frame."""
    return Frame(code.co_filename, code.co_name, int(line or code.co_firstlineno))


def library_prefixes() -> tuple[str, ...]:
    """Folders whose code is not the user's: the standard library, every site-packages (the user's too, and
    a layered environment's on sys.path), perfcore itself; each as given and with links resolved."""
    import site

    paths = sysconfig.get_paths()
    found = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    found.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    found.add(site.getusersitepackages() if hasattr(site, "getusersitepackages") else None)
    found.update(p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"))
    found.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the perfcore package
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
    sampler_ns: int  # time the sampler thread spent reading stacks (its share of the GIL)

    @staticmethod
    def empty(interval_ns: int = int(DEFAULT_INTERVAL_S * 1e9), thread_id: int = 0) -> "LineSamples":
        return LineSamples(
            np.zeros(0, np.int64), np.zeros(0, np.int32), (), interval_ns, interval_ns, thread_id, 0, 0, 0
        )


class LineSampler:
    """with LineSampler() as s: ...; s.result() -> LineSamples of the main thread (or `thread_id`)."""

    def __init__(
        self,
        thread_id: int | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], int] = time.perf_counter_ns,
        max_samples: int = MAX_SAMPLES,
    ):
        if not (0 < interval_s < float("inf")):
            from perfcore.errors import UsageError

            raise UsageError(f"line sampling interval must be a finite number of seconds > 0, got {interval_s}")
        self.thread_id = threading.main_thread().ident if thread_id is None else thread_id
        self.interval_s = float(interval_s)
        self._clock = clock
        self._max = int(max_samples)
        self._t = array("q")
        self._stack = array("i")
        self._ids: dict[tuple, int] = {}  # ((code, line), ...) -> stack id
        self._missed = self._dropped = self._busy_ns = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample_once(self) -> None:
        t0 = self._clock()
        frame = sys._current_frames().get(self.thread_id)
        t = self._clock()
        if frame is None:
            self._missed += 1
            return
        if len(self._t) >= self._max:
            self._dropped += 1
            return
        key = []
        while frame is not None and len(key) < MAX_DEPTH:
            key.append((frame.f_code, frame.f_lineno))
            frame = frame.f_back
        del frame
        key = tuple(key)
        sid = self._ids.get(key)
        if sid is None:
            sid = self._ids[key] = len(self._ids)
        self._t.append(t)
        self._stack.append(sid)
        self._busy_ns += self._clock() - t0

    def _loop(self) -> None:
        wait = self._stop.wait
        while not wait(self.interval_s):
            try:
                self._sample_once()
            except Exception:  # a frame torn down mid-walk: that one sample is lost, never the run
                self._missed += 1

    def start(self) -> "LineSampler":
        self._thread = threading.Thread(target=self._loop, name="perfcore-lines", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> LineSamples:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        return self.result()

    def __enter__(self) -> "LineSampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def result(self) -> LineSamples:
        """The samples so far, the stacks resolved to (file, function, line)."""
        stacks: list[tuple[Frame, ...]] = [()] * len(self._ids)
        for key, sid in list(self._ids.items()):
            stacks[sid] = tuple(code_frame(code, line) for code, line in key)
        n = min(len(self._t), len(self._stack))
        interval_ns = int(self.interval_s * 1e9)
        return LineSamples(
            np.array(self._t[:n], dtype=np.int64),
            np.array(self._stack[:n], dtype=np.int32),
            tuple(stacks),
            interval_ns,
            interval_ns + int(sys.getswitchinterval() * 1e9),
            int(self.thread_id or 0),
            self._missed,
            self._dropped,
            self._busy_ns,
        )
