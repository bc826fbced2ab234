"""How the profiled script ends, seen from inside it: exit handlers that write perfcore's part on a
normal exit, an uncaught exception, SIGTERM, SIGHUP and os._exit (which skips atexit), and dying of SIGINT
after Ctrl-C as Python would have."""

from __future__ import annotations

import atexit
import builtins
import os
import signal
import sys
import threading
import traceback
import types

from perfcore.run.child.stop import first_line

__all__ = ["install_exit_hooks", "die_of_sigint", "uncaught_reason", "without_own_frames", "tidy"]


def install_exit_hooks(inst) -> None:
    """Exit handlers, an excepthook and SIGTERM/SIGHUP handlers (where the script has none) for `inst`."""
    atexit.register(inst.finalize)
    prev_hook = sys.excepthook

    def excepthook(tp, value, tb):
        interrupted = issubclass(tp, KeyboardInterrupt)
        try:
            if isinstance(value, BaseException):
                tidy(value)
                tb = value.__traceback__
        except Exception:  # never a second error: the traceback as it came
            pass
        try:
            text = "".join(traceback.format_exception(tp, value, tb))
            inst.ending.ended("interrupted" if interrupted else "crashed", first_line(tp, value), text)
        except Exception:  # a message that cannot be made text: the type alone, never a second error
            inst.ending.ended("interrupted" if interrupted else "crashed", tp.__name__)
        if interrupted and threading.current_thread() is threading.main_thread():
            # The process is dying of Ctrl-C now; a second and third one pressed impatiently would
            # only cut the writing of the results short (die_of_sigint ends it by SIGINT after).
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        prev_hook(tp, value, tb)

    sys.excepthook = excepthook
    _note_usage_errors(inst.ending)
    orig_exit = os._exit

    def _exit(code):
        # os._exit skips atexit: write the part first (the main process only; a forked
        # worker's copy is disabled and returns at once).
        if os.getpid() == inst.pid:
            inst.ending.ended("finished")  # the parent reports the code itself
            inst.finalize()
        orig_exit(code)

    os._exit = _exit
    if threading.current_thread() is not threading.main_thread():
        return
    _report_signals_to_parent()

    def on_term(signum, frame):
        inst.ending.ended("terminated")
        if _shutting_down(frame):
            # The interpreter is already on its way out (waiting for threads, atexit: a
            # multiprocessing.Pool exiting, the second TERM `timeout` sends, a HUP and the TERM
            # perfcore passes on): an exception here would only print "Exception ignored in ...".
            # Write the results now and die of the signal, as the script would have.
            if _inside(frame, inst.finalize):
                return  # the results are being written right now: let that finish, then the exit
            signal.signal(signum, signal.SIG_IGN)
            inst.finalize()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise SystemExit(128 + signum)

    # SIGHUP (the terminal closed, ssh dropped) ends the script as SIGTERM does: results first.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, on_term)


def _own(tb) -> bool:
    from perfcore.capture.line_sampler import OWN_DIR

    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(OWN_DIR)


def _raised_by_own(tb) -> bool:
    """Whether perfcore raised it: the innermost frame that is not a library's (the standard library,
    site-packages) is perfcore's, its own code or a library call made from it."""
    from perfcore.capture.line_sampler import is_library, library_prefixes

    prefixes, frames = library_prefixes(), []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    for t in reversed(frames):
        if _own(t):
            return True
        if not is_library(t.tb_frame.f_code.co_filename, prefixes):
            return False
    return False


_GROUP = getattr(builtins, "BaseExceptionGroup", ())  # Python >= 3.11; () matches nothing before


def tidy(value: BaseException) -> None:
    """The script's error (or a Ctrl-C, which lands wherever the main thread is, now and then in perfcore's
    step bookkeeping) on its way out through perfcore's wrappers: its traceback, and those of the errors
    chained to it, show the script's and the libraries' frames, as they would without perfcore. An error
    perfcore raised itself keeps them all."""
    seen: set[int] = set()
    todo = [value]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt) or not _raised_by_own(e.__traceback__):
            e.with_traceback(without_own_frames(e.__traceback__))
        group = e.exceptions if isinstance(e, _GROUP) else ()
        todo += [x for x in (e.__cause__, e.__context__, *group) if isinstance(x, BaseException)]


def without_own_frames(tb):
    """The traceback `tb` without the entries of perfcore's own frames (a new chain; `tb` is left as is)."""
    kept = []
    while tb is not None:
        if not _own(tb):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def _report_signals_to_parent() -> None:
    """Python's C-level signal handler writes each signal's number to the pipe `perfcore run` holds the
    other end of (signal.set_wakeup_fd), so the parent knows this process got a group's Ctrl-C and
    does not send a second copy. Taken out of the environment: the script's own Python subprocesses
    never see a descriptor number that is not theirs. Left alone where the script has its own."""
    import stat

    from perfcore.run.protocol import ENV_SIGNAL_FD

    raw = os.environ.pop(ENV_SIGNAL_FD, None)
    try:
        fd = int(raw) if raw else -1
        if fd < 0 or not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        os.set_inheritable(fd, False)
        os.set_blocking(fd, False)  # set_wakeup_fd refuses a blocking one; a full pipe drops a byte
        old = signal.set_wakeup_fd(fd, warn_on_full_buffer=False)
        if old != -1:  # someone set one first: theirs stays
            signal.set_wakeup_fd(old)
    except (OSError, ValueError):
        pass


def uncaught_reason(reason: str) -> str:
    """The script's end as Python recorded it, when perfcore's excepthook could not: a second
    Ctrl-C (a terminal's group signal, then the one perfcore passes on) can land as the hook starts,
    so Python prints "Error in sys.excepthook" and the hook never ran. Python keeps the uncaught
    exception in sys.last_type (sys.last_exc from 3.12) before it calls any hook."""
    exc = getattr(sys, "last_exc", None)
    tp = type(exc) if exc is not None else getattr(sys, "last_type", None)
    if reason != "finished" or not isinstance(tp, type) or issubclass(tp, SystemExit):
        return reason
    return "interrupted" if issubclass(tp, KeyboardInterrupt) else "crashed"


def _shutting_down(frame) -> bool:
    """Whether Python is ending: joining threads (threading's shutdown on the stack) or past it (atexit)."""
    if not threading.main_thread().is_alive():
        return True
    while frame is not None:
        if frame.f_code.co_name == "_shutdown" and frame.f_code.co_filename == threading.__file__:
            return True
        frame = frame.f_back
    return False


def _inside(frame, method) -> bool:
    """Whether `method` is running somewhere below `frame` (the frame a signal interrupted)."""
    code = getattr(getattr(method, "__func__", method), "__code__", None)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def _note_usage_errors(ending) -> None:
    """argparse's message for an exit 2 (the script's own usage error), kept so the parent can quote
    it: it went to the terminal, which perfcore does not read."""
    import argparse

    ending.usage_error = None
    orig = argparse.ArgumentParser.error

    def error(parser, message):
        ending.usage_error = f"{parser.prog}: error: {message}"[:300]
        return orig(parser, message)

    error.__wrapped__ = orig
    argparse.ArgumentParser.error = error


def die_of_sigint() -> None:
    """Python reports an unhandled Ctrl-C by dying of SIGINT (exit 130 in a shell), but writing the
    part can clear its flag for that; die the same way ourselves. perfcore's exit handler was
    registered first, so it runs after every other one."""
    if threading.current_thread() is not threading.main_thread():
        return
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
