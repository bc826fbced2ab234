"""perfcore's own work on the training thread after a step ends: settling, following the device, the
memory sample and the progress file. All of it is own work, left out of the step it falls in."""

from __future__ import annotations

import sys

from perfcore.run.child.memory_samples import MemoryWatch

__all__ = ["Upkeep", "own_costs"]


class Upkeep:
    """One process's (or notebook cell's) upkeep: its memory samples and, once the timer exists, its
    progress file."""

    def __init__(self) -> None:
        self.memory = MemoryWatch()  # per-step memory samples
        self.progress = None  # run.child.progress.ProgressWriter, from start()
        self.follow_until = 0  # the engine's, from start() (numpy loads with it)
        self.upkeep_due = None  # recording.engine.upkeep_due, from start()
        self.lines = None  # run.lines.LineCapture: its hand-back is measured again now and then

    def start(self, on_gpu: bool, progress) -> None:
        """With the timer: how memory is read on this device, and where progress is written."""
        from perfcore.recording.engine import FOLLOW_UNTIL, upkeep_due

        self.follow_until, self.upkeep_due = FOLLOW_UNTIL, upkeep_due
        self.memory.start(on_gpu)
        self.progress = progress

    def after(self, n: int, timer, decided: bool, torch_hooks) -> None:
        """After step end n (memory every step on a GPU: two cheap counters; every 8th on CPU, where one
        syscall costs ~8 us after an optimizer step). decided: the step source is chosen (settling and
        the live view wait for it)."""
        engine = timer.engine
        with engine.own:
            if n == 1:
                torch_hooks.first_step_done()
            if decided and self.upkeep_due(engine, n):  # by count, or by the tracer's volume of records
                engine.upkeep(n)
            elif n <= self.follow_until:
                engine.follow_device()  # the GPU the work is on (model.to(rank) without set_device)
            if (n - 1) % self.memory.every == 0:
                self.memory.sample(n - 1)
            if n & 63 == 0 and self.lines is not None:
                self.lines.remeasure()  # a clock read; the measure itself at most every 30 s
            if decided and self.progress is not None:
                self.progress.tick(timer)  # one clock read unless the live view or a checkpoint is due


def own_costs(inst) -> dict:
    """How often the run's per-call wrappers ran on the training thread, and what one call of each costs
    on this machine now (measured here, at the end): what recording.own_work.beside_steps adds to the
    overhead the run reports. The line sampler's own time comes with its samples."""
    from perfcore.capture.sync_calls import SyncCounter
    from perfcore.recording.engine import phase_cost_ns
    from perfcore.analysis.codec import to_doc
    from perfcore.recording.phase_cost import calibrations, passed_call_ns
    from perfcore.run.child.loaders import fetch_cost_ns

    try:
        counter = inst.lines.counter if inst.lines is not None else None
        calls = counter.calls_seen if counter is not None else 0
        fetches = inst.loaders.main_process_batches()
        torch = sys.modules.get("torch")
        # Calibrated on real tensors' .item() in a loop (the counter is off by now): the wrapper around a
        # method that does nothing costs a third of what a run's counted calls cost.
        call_ns = SyncCounter.call_cost_ns(calls=1024, blocks=9, torch=torch) if calls else 0.0
        passed = inst.torch_hooks.passed_calls()
        costs = {
            # Hooked calls that went straight through (a submodule inside the timed forward): each one's
            # call layer is in no phase.
            "passed_calls": passed,
            "passed_call_ns": passed_call_ns() if passed else 0.0,
            "sync_calls": calls,
            "sync_call_ns": call_ns,
            # The steps the counter was on (its cap took it off there), or -1: on for the whole run.
            "sync_calls_steps": counter.full_at_step if counter is not None else -1,
            "fetches": fetches,
            "fetch_ns": fetch_cost_ns() if fetches else 0.0,
        }
        phase_cost_ns()  # the part's own calibration (made once a process), so the summary below counts it
        return {**costs, "calibration": to_doc(calibrations())}
    except Exception as e:  # the part is still written: its overhead then leaves these out, and says so
        return {"error": f"{type(e).__name__}: {e}"}
