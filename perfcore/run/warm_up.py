"""Importing modules on a lower-priority daemon thread while the script runs, so that the thread
that needs them later finds them loaded: the parent's finishing (numpy, pandas, the report code), the
training process's first settle (pandas, which took 0.3-3 s on the training thread ~10 s into every
run, in the script's own step-time meter)."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from typing import Callable

__all__ = ["WarmUp", "NICE_INCREMENT"]

NICE_INCREMENT = 10  # well below the script, which the warm-up must not slow: it gets the spare cycles


class WarmUp:
    """A daemon thread importing `modules` (then calling `after`, if given) at a lower priority,
    from `delay_s` after start().
    stop() asks it to end after the module it is on and waits for that: the main thread then imports
    whatever is left itself, at its own priority, so a warm-up the script outran costs nothing."""

    def __init__(
        self,
        modules: tuple[str, ...],
        nice: int = NICE_INCREMENT,
        after: Callable[[], str | None] | None = None,
        name: str = "perfcore-warm-up",
        delay_s: float = 0.0,
    ):
        self.modules, self.nice, self.after, self.delay_s = modules, nice, after, delay_s
        self.done: list[str] = []
        self._tid: int | None = None
        self._nice_before: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

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

    def _run(self) -> None:
        if self.delay_s > 0 and self._stop.wait(self.delay_s):
            return
        self._lower_priority()
        for name in self.modules:
            if self._stop.is_set():
                return
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - its user imports it again and reports a real failure there
                continue
            self.done.append(name)
        if self.after is not None and not self._stop.is_set():
            try:
                done = self.after()
            except Exception:  # noqa: BLE001 - whoever needs it loads it when it does
                return
            if done:
                self.done.append(done)

    def stop(self) -> list[str]:
        """What it loaded; returns once it is no longer importing."""
        self._stop.set()
        if self._thread.is_alive():
            # Back to full priority for the module it is in, which the main thread now waits for;
            # an unprivileged process may not raise a priority (RLIMIT_NICE), and then it ends as it is.
            if self._nice_before is not None:
                try:
                    os.setpriority(os.PRIO_PROCESS, self._tid, self._nice_before)
                except OSError:
                    pass
            self._thread.join()
        return list(self.done)
