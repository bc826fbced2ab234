"""What perfcore's progress tick costs on the training thread, piece by piece.

The loop of a stalled step (tests/scripts/sleepy_steps.py: 40 x sleep(0.3) + a tiny SGD step, with
the loop's own perf_counter meter), with the pieces of the tick wrapped in timers. Run it under
perfcore run:

    python -m perfcore run -q --out pc --test-setting checkpoint_s=4 -- python bench/tick_profile.py
"""

import atexit
import collections
import runpy
import sys
import time
from pathlib import Path

import perfcore.analysis.store as store
import perfcore.recording.engine as engine
import perfcore.run.child.progress as progress

LOOP = str(Path(__file__).resolve().parent.parent / "tests" / "scripts" / "sleepy_steps.py")
cost_ms = collections.defaultdict(list)


def wrap(owner, name: str, label: str) -> None:
    fn = getattr(owner, name)

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            cost_ms[label].append((time.perf_counter() - t0) * 1e3)

    setattr(owner, name, timed)


wrap(progress.ProgressWriter, "tick", "tick (all)")
wrap(engine.Recording, "upkeep", "engine.upkeep")
wrap(engine.Recording, "_drain", "  _drain")
wrap(store.StepStore, "settle", "  store.settle")
wrap(progress.ProgressWriter, "snapshot", "snapshot")
wrap(progress, "_decide", "  _decide (verdict)")
wrap(progress, "_write_atomic", "_write_atomic")
wrap(progress.ProgressWriter, "checkpoint", "checkpoint")


def show() -> None:
    for label, values in cost_ms.items():
        due = [v for v in values if v > 0.05] or values  # the tick returns at once when nothing is due
        print(
            f"{label:22s} n={len(due):3d} mean {sum(due) / len(due):7.2f} ms  max {max(due):7.2f} ms  "
            f"first {due[0]:7.2f}"
        )


atexit.register(show)
# The loop: 40 iterations of sleep(0.3) and a tiny SGD step, with the loop's own meter (METER ...).
sys.argv = [LOOP, "40", "0.3"]
runpy.run_path(LOOP, run_name="__main__")
