"""--steps reached inside the profiled script: how perfcore stops it, and what it says when the
script ran on after the stop."""
from __future__ import annotations

import sys
import threading

__all__ = ["request_stop", "stop_note", "release_stop"]


def request_stop(inst) -> None:
    """--steps reached: stop recording at once (nothing after this is counted, whatever the script
    does next), then end the script as sys.exit(0) would, at this safe point between steps. The
    thread that reached N raises the stop signal; on another thread the main thread gets it too,
    and every other thread at its next optimizer step, so no training thread runs on alone."""
    if inst.stop_requested:
        return
    inst.stop_requested = True
    inst.exit_reason = "steps reached"
    inst.t_stop = inst.now_ns()
    inst.disarm()
    sys.stderr.write(f"perfcore: {inst.steps_wanted} steps measured after {inst.warmup} warm-up; "
                     f"stopping the {'cell' if inst.in_cell else 'script'} (--steps)\n")
    stopped = {threading.get_ident()}
    # In a notebook the main thread is the kernel's once the cell has returned: never stopped from here.
    if threading.get_ident() != inst.torch_hooks.main_ident and not inst.in_cell:
        import ctypes

        stopped.add(inst.torch_hooks.main_ident)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(inst.torch_hooks.main_ident),
                                                   ctypes.py_object(SystemExit))
    from torch.optim.optimizer import register_optimizer_step_post_hook

    def after_stop(optimizer, args, kwargs):
        # Another training thread: stopped at its first step after the stop. A thread already
        # stopped that steps again caught the stop (the script or a library): counted, for the note.
        if threading.get_ident() not in stopped:
            stopped.add(threading.get_ident())
            raise SystemExit(0)
        inst.steps_after_stop += 1

    inst._after_stop = register_optimizer_step_post_hook(after_stop)
    raise SystemExit(0)


def stop_note(inst) -> str | None:
    """What the script did after perfcore stopped it at --steps, when it did not simply end."""
    if not inst.stop_requested:
        return None
    ran_s = (inst.now_ns() - inst.t_stop) / 1e9
    if inst.steps_after_stop == 0 and ran_s < 2.0:
        return None
    more = f" and {inst.steps_after_stop} more optimizer step(s)" if inst.steps_after_stop else ""
    who = "the cell" if inst.in_cell else "the script"
    return (f"{who} ran on for {ran_s:.1f} s{more} after perfcore stopped it at --steps "
            f"{inst.steps_wanted} (it caught the SystemExit): nothing after the stop "
            f"is measured; the {inst.steps_wanted} measured steps are the result")


def release_stop(inst) -> None:
    """Remove the hook request_stop left on every optimizer: a notebook cell's stop ends with the cell."""
    if getattr(inst, "_after_stop", None) is not None:
        inst._after_stop.remove()
        inst._after_stop = None
