"""Where a step ends, whatever the loop: one step source per run, chosen in this order.

  optimizer  the first torch.optim optimizer to step (GradScaler, accelerate, Lightning and the
             HF Trainer step torch.optim underneath); a GAN's second optimizer is in the same step
  backward   the end of each outermost backward on the main thread (manual SGD: p.data.add_)
  batch      the start of each training batch fetch (grad enabled; eval loaders excluded)
  forward    the start of each outermost module call (inference and evaluation loops)

Until an optimizer steps, the lower sources are only collected. The choice is made as late as it
can be: at the first optimizer step; when `--steps` is reached by the best source seen and no
optimizer exists that could still step; when the collected steps reach the settling bound; at the
end. A forced source (--step-on) is chosen from the start.
"""
from __future__ import annotations

import bisect
import os
import sys
import threading
import time

from perfcore.run.protocol import STEP_SOURCES

__all__ = ["SOURCES", "StepSources", "DESCRIBE", "with_eval_rows"]

SOURCES = STEP_SOURCES

DESCRIBE = {
    "optimizer": "optimizer steps (torch.optim)",
    "backward": "backward passes on the main thread (no torch.optim optimizer stepped)",
    "batch": "training batch fetches (no optimizer step, no backward)",
    "forward": "top-level module calls (no optimizer step, no backward, no training DataLoader)",
}

LOOKS_FOR = ("perfcore looks for a step in: torch.optim optimizer.step(), else loss.backward() on the main "
             "thread, else a DataLoader batch fetch, else a top-level nn.Module call; none has happened yet. "
             "Force one with perfcore run --step-on optimizer|backward|batch|forward")

# Steps collected before the choice is made at the latest (the timer's settling bound).
DECIDE_BY = 16384


def with_eval_rows(ends: list[int], passes: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Step ends with each evaluation pass's end added where the pass lies between two steps, so the
    pass (and the little before it) is a row of its own; returns the ends and those rows."""
    out, rows = list(ends), []
    for e0, e1 in sorted(passes):
        k = bisect.bisect_right(out, e0)
        if k > 0 and (k == len(out) or out[k] > e1):
            out.insert(k, e1)
            rows.append(k)
    return out, rows


class StepSources:
    """The candidate step ends of every source, and the choice among them."""

    def __init__(self, inst, forced: str | None) -> None:
        self.inst = inst
        self.forced = forced
        self.chosen: str | None = forced
        self.optimizers_made = 0
        self.counts = {"backward": 0, "batch": 0, "forward": 0, "batch_all": 0}
        # Candidate times, kept while the source is undecided (or chosen).
        self.ends: dict[str, list[int]] = {"backward": [], "batch": [], "forward": []}
        self.eval_passes: list[tuple[int, int]] = []  # (start, end) ns
        self._eval_start: int | None = None
        self.scaler_skips = 0
        self._scaler_opt: int | None = None
        self._warned = False
        self.last_fetch = 0

    # -- candidates -----------------------------------------------------------------------------
    def backward_ended(self, t: int) -> None:
        self.counts["backward"] += 1
        self._candidate("backward", t)

    def fetch_started(self, t: int, grad_enabled: bool) -> None:
        self.counts["batch_all"] += 1
        self.last_fetch = t
        if grad_enabled or self.forced == "batch":
            self.counts["batch"] += 1
            self._candidate("batch", t)

    def forward_started(self, t: int) -> None:
        self.counts["forward"] += 1
        self._candidate("forward", t)

    def _candidate(self, source: str, t: int) -> None:
        if self.chosen is None:
            self.ends[source].append(t)
            self.maybe_decide()
        elif self.chosen == source:
            # Batch and forward mark a step's start: the first one opens step 0, the next ends it.
            if source == "backward" or self.ends[source]:
                self.inst.step_ended(t)
            else:
                self.ends[source].append(t)

    def boundaries(self, source: str) -> list[int]:
        """The step ends this source gives from what was collected so far."""
        ends = self.ends.get(source, [])
        return list(ends) if source == "backward" else list(ends[1:])

    # -- the choice -----------------------------------------------------------------------------
    def count(self, source: str) -> int:
        """How many step ends this source has given so far (no copy: this runs at every event)."""
        n = len(self.ends.get(source, ()))
        return n if source == "backward" else max(0, n - 1)

    def best_lower(self) -> str | None:
        for s in SOURCES[1:]:
            if self.count(s):
                return s
        return None

    def maybe_decide(self) -> None:
        best = self.best_lower()
        if best is None or self.inst.timer is None:
            return
        n = self.count(best)
        if n >= DECIDE_BY or (self.optimizers_made == 0 and n >= self.inst.stop_at):
            self.choose(best)
            self.inst.after_step(len(self.inst.timer.engine.boundaries))

    def choose(self, source: str) -> None:
        """Fix the source; the steps collected so far become the timer's."""
        self.chosen = source
        timer = self.inst.timer
        eval_rows = None
        if source != "optimizer" and timer is not None:
            ends = self.boundaries(source)
            if source == "backward":
                ends, eval_rows = with_eval_rows(ends, self.eval_passes)
            timer.engine.set_boundaries(ends)
        for s, ends in self.ends.items():
            # Batch and forward keep their last start: it opens the step in progress.
            del ends[:-1 if s == source and s != "backward" and ends else None]
        self.inst.source_chosen(source, eval_rows)

    def optimizer_stepped(self) -> None:
        if self.chosen is None:
            self.choose("optimizer")

    def finish(self) -> str | None:
        """At the end: the source, chosen now if it was not yet (None: nothing looked like a step)."""
        if self.chosen is None:
            best = self.best_lower()
            if best is not None:
                self.choose(best)
        last = self.ends["forward"][-1:] if self.chosen == "forward" else []
        if last and self.last_fetch > last[0]:
            # An inference loop over a DataLoader: the fetch after the last module call (the one that
            # ends the epoch) closes the last step, as it does for the batch source.
            self.inst.step_ended(self.last_fetch)
        return self.chosen

    # -- GradScaler, evaluation -----------------------------------------------------------------
    def scaler_stepped(self, optimizer, stepped: bool) -> bool:
        """True when a skipped GradScaler step should end the step (it is the clock optimizer's)."""
        if self._scaler_opt is None:
            self._scaler_opt = id(optimizer)
        if id(optimizer) != self._scaler_opt or stepped:
            return False
        self.scaler_skips += 1
        return self.chosen in (None, "optimizer")

    def loop_state(self) -> tuple[bool, int]:
        """Whether the loop trains now (grad enabled, no model.eval() pass open) and the steps it has
        made so far (step ends, backward ends): what tells a DataLoader's role."""
        torch = sys.modules.get("torch")
        grad = torch.is_grad_enabled() if torch is not None else True
        return grad and self._eval_start is None, self.inst.boundary_count() + self.counts["backward"]

    def mode_changed(self, training: bool, t: int) -> None:
        if not training and self._eval_start is None:
            self._eval_start = t
        elif training and self._eval_start is not None:
            self.eval_passes.append((self._eval_start, t))
            self._eval_start = None
            if self.chosen in ("optimizer", "backward"):
                self.inst.eval_ended(*self.eval_passes[-1])

    # -- saying so when nothing looks like a step --------------------------------------------------
    def start_watch(self, after_s: float) -> None:
        """Say once that nothing looks like a step after `after_s` seconds of the script's CPU time.
        CPU time, not wall time: on a busy machine a script's imports alone can take 30 s of wall
        time, and a notice during start-up would be noise. A loop that runs without any step source
        burns CPU; one that waits (a download, an input()) is not training either."""
        if after_s > 0:
            self._arm(after_s)

    def _arm(self, wait_s: float) -> None:
        t = threading.Timer(wait_s, self._warn_if_none)
        t.daemon = True
        t.start()

    def _warn_if_none(self) -> None:
        if self._warned or self.inst.disabled or os.getpid() != self.inst.pid:
            return
        timer = self.inst.timer
        if self.chosen is None and self.best_lower() is None and (timer is None or not timer.engine.boundaries):
            short_s = self.inst.watch_s - time.process_time()
            if short_s > 0:  # not yet that much work done: look again when it could be
                self._arm(max(short_s, 0.5))
                return
            self._warned = True
            sys.stderr.write(f"perfcore: no step after {self.inst.watch_s:.0f} s of the script's CPU time. "
                             f"{LOOKS_FOR}\n")
