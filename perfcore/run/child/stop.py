"""How this process's run ends, as the child sees it: the reason (finished, crashed, interrupted,
terminated, steps reached), the exception or usage error behind it, and --steps: how perfcore stops
the script, and what it says when the script ran on after the stop."""

from __future__ import annotations

import re
import sys
import threading
from typing import Callable

__all__ = ["Ending", "first_line", "ERROR_CHARS"]

ERROR_CHARS = 200  # the exception as one line: its type and its message's first line, at most this long
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")  # CSI sequences, then the two-byte escapes


def first_line(tp: type, value: BaseException) -> str:
    """`Type: first line of the message`, at most ERROR_CHARS characters (the rest of a long message,
    a torch error's several paragraphs, is in the traceback file)."""
    # Terminal colours in a library's message (rich, transformers' "[1m") are no text of it.
    lines = [line.strip() for line in _ANSI.sub("", str(value)).splitlines() if line.strip()]
    text = f"{tp.__name__}: {lines[0]}" if lines else tp.__name__
    more = len(lines) > 1
    if len(text) > ERROR_CHARS or more:
        text = text[: ERROR_CHARS - 2].rstrip() + " …"
    return text


def trim_past_stop(inst) -> int:
    """The step ends past --steps, dropped once the clock is disarmed: another training thread can end a
    step between the one that reached the stop and the disarm (the stop's callback lets threads run), so
    the run's tables and statistics hold exactly the steps asked for. Returns how many were dropped."""
    if inst.timer is None:
        return 0
    engine = inst.timer.engine
    keep = inst.stop_at + len(inst.eval_rows)
    over = len(engine.boundaries) - keep
    dropped = engine.drop_steps_after(keep)
    if over > dropped:
        # Settled already (a settle ran between the stop and the disarm): those rows stay, and the run says so.
        inst.notes.append(
            f"{over - dropped} step(s) past --steps {inst.steps_wanted} were ended by another training thread "
            "before the stop took hold; they are in the result"
        )
    return dropped


class Ending:
    """One process's (or one notebook cell's) ending. The exit handlers and the --steps stop record into
    it through its methods; the part reads it."""

    def __init__(self, now_ns: Callable[[], int]) -> None:
        self.now_ns = now_ns
        self.reason = "finished"
        self.exception: str | None = None  # "Type: message" of the uncaught exception, its first line
        self.traceback: str | None = None  # that exception's whole traceback (written beside the part)
        self.t_exception: int | None = None  # when it reached the top (ns, the run's one clock)
        self.usage_error: str | None = None  # argparse's message for the script's own exit 2
        self.stop_requested = False
        self.t_stop = 0
        self.steps_after_stop = 0
        self._after_stop = None  # the optimizer hook the stop leaves behind (released with a cell)

    def ended(self, reason: str, exception: str | None = None, traceback: str | None = None) -> None:
        self.reason = reason
        if traceback is not None:
            self.traceback = traceback
        if exception is not None:
            self.exception = exception
            if self.t_exception is None:  # which rank of a job failed first: its error is the job's
                self.t_exception = self.now_ns()

    def request_stop(self, inst) -> None:
        """--steps reached: stop recording at once (nothing after this is counted, whatever the script
        does next), then end the script as sys.exit(0) would, at this safe point between steps. The
        thread that reached N raises the stop signal; on another thread the main thread gets it too,
        and every other thread at its next optimizer step, so no training thread runs on alone."""
        if self.stop_requested:
            return
        self.stop_requested = True
        self.reason = "steps reached"
        self.t_stop = self.now_ns()
        inst.torch_hooks.disarm()
        trim_past_stop(inst)
        if inst.config.stop_line:
            sys.stderr.write(
                f"perfcore: {inst.steps_wanted} steps measured after {inst.warmup} warm-up; "
                f"stopping the {'cell' if inst.in_cell else 'script'} (--steps)\n"
            )
        stopped = {threading.get_ident()}
        # In a notebook the main thread is the kernel's once the cell has returned: never stopped from here.
        main_ident = inst.torch_hooks.main_ident
        if threading.get_ident() != main_ident and not inst.in_cell:
            import ctypes

            stopped.add(main_ident)
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main_ident), ctypes.py_object(SystemExit))
        from torch.optim.optimizer import register_optimizer_step_post_hook

        def after_stop(optimizer, args, kwargs):
            # Another training thread: stopped at its first step after the stop. A thread already
            # stopped that steps again caught the stop (the script or a library): counted, for the note.
            if threading.get_ident() not in stopped:
                stopped.add(threading.get_ident())
                raise SystemExit(0)
            self.steps_after_stop += 1

        self._after_stop = register_optimizer_step_post_hook(after_stop)
        raise SystemExit(0)

    def stop_note(self, steps_wanted: int, who: str) -> str | None:
        """What `who` (the script, the cell) did after perfcore stopped it at --steps, when it did not
        simply end."""
        if not self.stop_requested:
            return None
        ran_s = (self.now_ns() - self.t_stop) / 1e9
        if self.steps_after_stop == 0 and ran_s < 2.0:
            return None
        more = f" and {self.steps_after_stop} more optimizer step(s)" if self.steps_after_stop else ""
        return (
            f"{who} ran on for {ran_s:.1f} s{more} after perfcore stopped it at --steps "
            f"{steps_wanted} (it caught the SystemExit): nothing after the stop "
            f"is measured; the {steps_wanted} measured steps are the result"
        )

    def release(self) -> None:
        """Remove the hook request_stop left on every optimizer: a notebook cell's stop ends with the cell."""
        if self._after_stop is not None:
            self._after_stop.remove()
            self._after_stop = None
