"""How the profiled script ends, seen from inside it: exit handlers that write perfcore's part on a
normal exit, an uncaught exception, SIGTERM and os._exit (which skips atexit), and dying of SIGINT
after Ctrl-C as Python would have."""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading

__all__ = ["install_exit_hooks", "die_of_sigint"]


def install_exit_hooks(inst) -> None:
    """Exit handlers, an excepthook and a SIGTERM handler (when the script has none) for `inst`."""
    atexit.register(inst.finalize)
    prev_hook = sys.excepthook

    def excepthook(tp, value, tb):
        inst.exit_reason = "interrupted" if issubclass(tp, KeyboardInterrupt) else "crashed"
        inst.exception = f"{tp.__name__}: {value}"
        prev_hook(tp, value, tb)

    sys.excepthook = excepthook
    _note_usage_errors(inst)
    orig_exit = os._exit

    def _exit(code):
        # os._exit skips atexit: write the part first (the main process only; a forked
        # worker's copy is disabled and returns at once).
        if os.getpid() == inst.pid:
            inst.exit_reason = "finished"  # the parent reports the code itself
            inst.finalize()
        orig_exit(code)

    os._exit = _exit
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        def on_term(signum, frame):
            inst.exit_reason = "terminated"
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, on_term)


def _note_usage_errors(inst) -> None:
    """argparse's message for an exit 2 (the script's own usage error), kept so the parent can quote
    it: it went to the terminal, which perfcore does not read."""
    import argparse

    inst.usage_error = None
    orig = argparse.ArgumentParser.error

    def error(parser, message):
        inst.usage_error = f"{parser.prog}: error: {message}"[:300]
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
