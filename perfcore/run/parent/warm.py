"""Loading what finishing a run needs while the script runs: the parent is idle until the script ends,
and after it only the real work should remain (numpy, pandas and the report code cost ~1-2 s to import
on a 2-core machine, as much as a short script's run).

Only on a core the script leaves idle: it judges the machine's idle time over windows of LOOK_S, its own
imports counted as idle, goes on while a core was spare and waits while none was. A priority alone did not keep it off the script's core: at nice +10 and 19 the
scheduler's trace still showed it running through the training thread's run-queue waits on a busy 2-core
machine (a thread that waits holds no lock, so the finish can always import the rest itself).

Once the script's processes write their results (ending()), nothing of the script's is left to slow: the
warm-up goes on at its full priority, beside their last seconds (the calibrations after the script, the
interpreter's own shutdown). On a machine with no spare core that overlap is all the warm-up there is:
finishing's imports then no longer wait for the script's process to end."""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from perfcore.capture.interference import read_stat

__all__ = ["WarmUp", "FINISH_MODULES", "Looks", "spare_core", "results_begun"]

# What finish_run and the terminal summary import, heaviest first (the most saved if the script ends early).
FINISH_MODULES = (
    "numpy",
    "pandas",
    "perfcore.analysis.reader",
    "perfcore.run.parent.finish",
    "perfcore.recording.replay",
    "perfcore.run.part_files",
    "perfcore.report.terminal",
    "perfcore.analysis.advice",
    "perfcore.analysis.memory_findings",
    "perfcore.analysis.interference",
    "perfcore.report.chrome_trace",
    "perfcore.report.plots",
    "perfcore.report.html",
    "PIL.Image",
    "PIL.ImageDraw",
    "PIL.ImageFont",
    "PIL.PngImagePlugin",
    "pyarrow.parquet",  # steps.parquet, when pyarrow is installed
)
# The lowest a thread can ask for: the warm-up must not slow the script. At +10 it still took the training
# thread's core on a busy 2-core machine (weight 110 against 1024; 19 is 15): the scheduler's own trace
# showed it running through most of the training thread's run-queue waits.
NICE_INCREMENT = 19
LOOK_S = 0.25  # how long one look at the machine's idle time lasts
SPARE_SHARE = 0.8  # of one core's time idle over a look: a core nobody (the script included) is using


def spare_core(before: dict[str, int], after: dict[str, int], cpus: int, own_ticks: float = 0.0) -> bool:
    """Whether /proc/stat's ticks between two reads left most of one core idle (steal is not idle);
    own_ticks, the looking thread's own CPU time in the window, count as idle: it is what would give way."""
    total = after["total_ticks"] - before["total_ticks"]
    idle = total - (after["busy_ticks"] - before["busy_ticks"]) - (after["steal_ticks"] - before["steal_ticks"])
    return total > 0 and (idle + own_ticks) * cpus >= SPARE_SHARE * total


class Looks:
    """Whether a core is spare, judged over windows of LOOK_S on the calling thread: the first call, and
    each after a window that found none, waits one window; while the last window found one, a call
    returns at once until LOOK_S has passed, then judges that window (the imports in it included).
    None where /proc/stat cannot tell (not Linux, a sandbox): then the warm-up goes on as it would."""

    def __init__(self, read=read_stat, clock=time.monotonic, cpu=time.thread_time, cpus: int | None = None):
        self._read, self._clock, self._cpu = read, clock, cpu
        self._cpus = cpus or os.cpu_count() or 1
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._start: tuple[float, dict[str, int], float] | None = None
        self._spare = False

    def _now(self) -> tuple[float, dict[str, int], float]:
        return self._clock(), self._read(), self._cpu()

    def __call__(self, stop: threading.Event) -> bool | None:
        try:
            if self._start is None or not self._spare:
                self._start = self._now()
                if stop.wait(LOOK_S):
                    return None
            elif self._clock() - self._start[0] < LOOK_S:
                return True
            now = self._now()
            own = (now[2] - self._start[2]) * self._tick
            self._spare = spare_core(self._start[1], now[1], self._cpus, own)
            self._start = now
            return self._spare
        except (OSError, ValueError, KeyError):
            return None


class WarmUp:
    """A daemon thread importing FINISH_MODULES (and loading the chart font) at a lower priority, then,
    once the script writes its results (ending), doing at full priority what finishing can before its
    process exits (ahead, called every LOOK_S).
    stop() asks it to end after the module it is on and waits for that: the main thread then imports
    whatever is left itself, at its own priority, so a warm-up the script outran costs nothing."""

    def __init__(
        self,
        modules: tuple[str, ...] = FINISH_MODULES,
        nice: int = NICE_INCREMENT,
        look=None,
        ending: Callable[[], bool] = lambda: False,
        ahead: Callable[[], object] | None = None,
    ):
        self.modules, self.nice = modules, nice
        self._look = look if look is not None else Looks()
        self._ending, self._ahead = ending, ahead
        self.ended = False  # the script was seen writing its results: no more looks, full priority
        self.waits = 0  # looks that found no spare core
        self.done: list[str] = []
        self._tid: int | None = None
        self._nice_before: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="perfcore-warm-up", daemon=True)

    def start(self) -> "WarmUp":
        self._thread.start()
        return self

    def _lower_priority(self) -> None:
        # On Linux a nice value belongs to a thread (setpriority with its tid); elsewhere it would
        # lower the whole process, the status line and signal forwarding with it, so it is left alone.
        if not sys.platform.startswith("linux"):
            return
        try:
            self._tid = threading.get_native_id()
            self._nice_before = os.getpriority(os.PRIO_PROCESS, self._tid)
            os.setpriority(os.PRIO_PROCESS, self._tid, self._nice_before + self.nice)
        except (OSError, AttributeError):
            self._nice_before = None

    def _spare(self) -> bool:
        """Waits for a spare core, or for the script's end; False once stop() was called."""
        while not self._stop.is_set():
            if self.ended or self._has_ended():
                return True
            if self._look(self._stop) is not False:
                return not self._stop.is_set()
            self.waits += 1
        return False

    def _has_ended(self) -> bool:
        try:
            ended = bool(self._ending())
        except OSError:
            return False
        if ended:
            self.ended = True
            self._restore_priority()
        return ended

    def _restore_priority(self) -> None:
        # An unprivileged process may not raise a priority (RLIMIT_NICE): then it goes on as it is.
        if self._nice_before is not None:
            try:
                os.setpriority(os.PRIO_PROCESS, self._tid, self._nice_before)
            except OSError:
                pass

    def _run(self) -> None:
        self._lower_priority()
        for name in self.modules:
            if not self._spare():
                return
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - finishing imports it again and reports a real failure there
                continue
            self.done.append(name)
        if self._spare():
            try:
                from perfcore.report.plots import warm_fonts

                warm_fonts()
                self.done.append("fonts")
            except Exception:  # noqa: BLE001 - as above: the chart loads it when it draws
                pass
        # Then, once the script writes its results, the finishing work that needs nothing from its exit
        # (ahead: the parts already whole), until stop(); with nothing ahead the thread's work is done.
        while self._ahead is not None and not self._stop.is_set():
            if self.ended or self._has_ended():
                try:
                    self._ahead()
                except Exception:  # noqa: BLE001 - finishing does it again and says what failed
                    pass
            if self._stop.wait(LOOK_S):
                return

    def stop(self) -> list[str]:
        """What it loaded; returns once it is no longer importing."""
        self._stop.set()
        if self._thread.is_alive():
            self._restore_priority()  # for the module it is in, which the main thread now waits for
            self._thread.join()
        return list(self.done)


def results_begun(out: Path) -> Callable[[], bool]:
    """Whether some process of the run has begun writing its results: a part folder (parts/<key>/, real)
    holding anything but its checkpoint, which is all a part holds while its process trains."""
    from perfcore.run.protocol import CHECKPOINT, PARTS

    def begun() -> bool:
        root = out / PARTS
        if root.is_symlink() or not root.is_dir():
            return False
        with os.scandir(root) as parts:
            for d in parts:
                if d.is_dir(follow_symlinks=False):
                    with os.scandir(d.path) as inside:
                        if any(e.name != CHECKPOINT for e in inside):
                            return True
        return False

    return begun
