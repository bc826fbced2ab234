"""The status line of a run while it happens, read from the child's progress file: on the parent's
stderr (`perfcore run`, a terminal only) and under a notebook cell (%%perfcore, in-process)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from perfcore.run.protocol import PROGRESS_EVERY_S, read_progress

__all__ = ["LiveStatus", "NotebookStatus", "status_text"]


def status_text(p: dict[str, Any]) -> str:
    """One line: steps (of N, ETA), step time, the five shares, the verdict so far."""
    n, warm, want = int(p.get("steps", 0)), int(p.get("warmup", 0)), int(p.get("steps_wanted") or 0)
    parts = [f"perfcore: step {n}" + (f"/{warm + want}" if want else "")]
    ms = p.get("step_ms")
    if ms:
        parts.append(f"{ms:.1f} ms/step")
        if want and n < warm + want:
            parts.append(f"ETA {(warm + want - n) * ms / 1e3:.0f} s")
    fr = p.get("breakdown_fraction")
    if fr:
        from perfcore.analysis.attribution import LABELS  # here: the script starts before pandas loads

        parts.append(" ".join(f"{lb} {100 * fr.get(lb, 0):.0f}%" for lb in LABELS))
    v = (p.get("verdict") or {}).get("summary")
    if v:
        parts.append(v.split(";")[0])
    elif not fr:
        parts.append("shares after the first settled steps")
    return " | ".join(parts)


class _Refresher:
    """A daemon thread that calls the subclass's refresh() every every_s until stopped; a failing
    refresh ends the thread quietly (a status line is never worth failing a run for)."""

    every_s: float

    def _start_thread(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.refresh()
            except Exception:
                return

    def _stop_thread(self) -> None:
        stop, thread = getattr(self, "_stop", None), getattr(self, "_thread", None)
        if stop is not None:
            stop.set()
        if thread is not None:
            thread.join(timeout=5)


class LiveStatus(_Refresher):
    """Parent side: a status line on stderr, refreshed every ~2 s from the child's progress file, via
    rich; nothing at all when stderr is not a terminal or quiet is set."""

    def __init__(self, run_dir: Path, *, quiet: bool = False, every_s: float = PROGRESS_EVERY_S, console=None):
        self.run_dir, self.every_s = Path(run_dir), every_s
        self.console = console
        self.enabled = not quiet and (console.is_terminal if console is not None else _stderr_is_tty())
        self._live = None
        self.shown: list[str] = []

    def start(self) -> "LiveStatus":
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.live import Live

        console = self.console or Console(stderr=True)
        self._live = Live(
            "", console=console, auto_refresh=False, transient=True, redirect_stdout=False, redirect_stderr=False
        )
        self._live.start()
        self._start_thread("perfcore-status")
        return self

    def refresh(self) -> str | None:
        p = read_progress(self.run_dir)
        if p is None or self._live is None:
            return None
        from rich.text import Text

        line = status_text(p)
        self.shown.append(line)
        self._live.update(Text(line, no_wrap=True, overflow="ellipsis"), refresh=True)
        return line

    def stop(self) -> None:
        self._stop_thread()
        if self._live is not None:
            self._live.stop()
            self._live = None


class NotebookStatus(_Refresher):
    """The same status line in a notebook (%%perfcore): one output area under the cell, updated in place
    every ~2 s from the progress file. Nothing outside an IPython kernel."""

    def __init__(self, run_dir: Path, *, every_s: float = PROGRESS_EVERY_S, handle=None):
        self.run_dir, self.every_s, self.handle = Path(run_dir), every_s, handle

    def start(self) -> "NotebookStatus":
        if self.handle is None:
            try:
                from IPython import get_ipython
                from IPython.display import HTML, display
            except ImportError:
                return self
            if get_ipython() is None:
                return self
            self.handle = display(HTML(""), display_id=True)
        self._start_thread("perfcore-notebook-status")
        return self

    def refresh(self) -> str | None:
        p = read_progress(self.run_dir)
        if p is None or self.handle is None:
            return None
        import html

        line = status_text(p)
        self.handle.update(_html(f"<code>{html.escape(line)}</code>"))
        return line

    def stop(self) -> None:
        self._stop_thread()
        if self.handle is not None:
            try:
                self.handle.update(_html(""))  # the report below replaces it
            except Exception:
                pass


def _html(text: str):
    try:
        from IPython.display import HTML
    except ImportError:
        return text
    return HTML(text)


def _stderr_is_tty() -> bool:
    try:
        return os.isatty(2)
    except (OSError, ValueError):
        return False
