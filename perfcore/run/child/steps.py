"""Where a step ends, whatever the loop: one step source per run, chosen in this order.

  optimizer  the torch.optim optimizer that is stepping (GradScaler, accelerate, Lightning and the
             HF Trainer step torch.optim underneath): the first to step, until another steps twice
             with no step of it between (a later stage's); a GAN's second optimizer is in the same step
  backward   the end of each outermost backward on the main thread (manual SGD: p.data.add_)
  batch      the start of each training batch fetch (grad enabled; eval loaders excluded)
  forward    the start of each outermost module call (inference and evaluation loops)

Until an optimizer steps, the lower sources are only collected. The choice is made as late as it
can be: at the first optimizer step; when `--steps` is reached by the best source seen and no
optimizer exists that could still step; when the collected steps reach the settling bound; at the
end. A forced source (--step-on) is chosen from the start.

StepSources only decides: each observation returns the events it implies (StepEnded, SourceChosen,
EvalEnded; usually none), and the instrumentation, their one owner, applies them to the timer.
"""

from __future__ import annotations

import bisect
import os
import sys
import threading
import time
from typing import NamedTuple

from perfcore.run.protocol import STEP_SOURCES

__all__ = ["StepSources", "with_eval_rows", "StepEnded", "SourceChosen", "EvalEnded", "NOTHING"]

# Steps collected before the choice is made at the latest (the timer's settling bound).
DECIDE_BY = 16384


class StepEnded(NamedTuple):
    """The chosen Python-side source (backward, batch, forward) ended a step at t_ns."""

    t_ns: int


class SourceChosen(NamedTuple):
    """The step source is fixed. ends: the step ends it gave so far, which replace the timer's (None:
    keep them, the optimizer's clock wrote them); eval_rows: which of them end evaluation passes;
    upkeep: the choice was made at a step end, whose upkeep is due once it is applied."""

    source: str
    ends: list[int] | None
    eval_rows: list[int] | None
    upkeep: bool


class EvalEnded(NamedTuple):
    """An evaluation pass (model.eval() ... train()) ran from t0_ns to t1_ns."""

    t0_ns: int
    t1_ns: int


NOTHING: tuple = ()  # what most observations imply


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
        self.optimizer_facts: dict | None = None  # the first optimizer's class and settings, for advice
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

    def optimizer_made(self) -> int:
        """An optimizer is being constructed (counted before its __init__ runs, as a wrapper's inner
        optimizers come after it): its number."""
        self.optimizers_made += 1
        return self.optimizers_made

    def first_optimizer(self, opt, site: str | None = None) -> None:
        """The first optimizer, constructed: its class and settings, and the user's line that made it (file:line),
        kept for advice."""
        from perfcore.run.split_facts import optimizer_facts

        facts = optimizer_facts(opt)
        if facts is not None and site and site != "?":
            facts["site"] = site
        self.optimizer_facts = facts

    def backward_ended(self, t: int) -> tuple:
        self.counts["backward"] += 1
        return self._candidate("backward", t)

    def fetch_started(self, t: int, grad_enabled: bool) -> tuple:
        self.counts["batch_all"] += 1
        self.last_fetch = t
        if grad_enabled or self.forced == "batch":
            self.counts["batch"] += 1
            return self._candidate("batch", t)
        return NOTHING

    def forward_started(self, t: int) -> tuple:
        self.counts["forward"] += 1
        return self._candidate("forward", t)

    def _candidate(self, source: str, t: int) -> tuple:
        if self.chosen is None:
            kept = self.ends[source]
            kept.append(t)
            # Only the best lower source reaching a bound can decide, and the source whose count grew is
            # the only one that reached anything: below both bounds nothing is decided, so the choice is
            # not looked for at every event of a loop with no optimizer (an inference loop: 16k steps).
            n = len(kept) if source == "backward" else len(kept) - 1
            if n < DECIDE_BY and (self.optimizers_made or n < self.inst.stop_at):
                return NOTHING
            return self.maybe_decide()
        if self.chosen == source:
            # Batch and forward mark a step's start: the first one opens step 0, the next ends it.
            if source == "backward" or self.ends[source]:
                return (StepEnded(t),)
            self.ends[source].append(t)
        return NOTHING

    def boundaries(self, source: str) -> list[int]:
        """The step ends this source gives from what was collected so far."""
        ends = self.ends[source]
        return list(ends) if source == "backward" else list(ends[1:])

    # -- the choice -----------------------------------------------------------------------------
    def count(self, source: str) -> int:
        """How many step ends this source has given so far (no copy: this runs at every event)."""
        n = len(self.ends[source])
        return n if source == "backward" else max(0, n - 1)

    def best_lower(self) -> str | None:
        return next((s for s in STEP_SOURCES[1:] if self.count(s)), None)

    def maybe_decide(self) -> tuple:
        best = self.best_lower()
        if best is None or self.inst.timer is None:
            return NOTHING
        n = self.count(best)
        if n >= DECIDE_BY or (self.optimizers_made == 0 and n >= self.inst.stop_at):
            return (self.choose(best, upkeep=True),)
        return NOTHING

    def choose(self, source: str, upkeep: bool = False) -> SourceChosen:
        """Fix the source; the steps collected so far are to become the timer's."""
        self.chosen = source
        ends = eval_rows = None
        if source != "optimizer" and self.inst.timer is not None:
            ends = self.boundaries(source)
            if source == "backward":
                ends, eval_rows = with_eval_rows(ends, self.eval_passes)
        for s, kept in self.ends.items():
            # Batch and forward keep their last start: it opens the step in progress.
            del kept[: -1 if s == source and s != "backward" and kept else None]
        return SourceChosen(source, ends, eval_rows, upkeep)

    def optimizer_stepped(self) -> tuple:
        return (self.choose("optimizer"),) if self.chosen is None else NOTHING

    def finish(self) -> tuple:
        """At the end: the source chosen now if it was not yet (self.chosen stays None when nothing looked
        like a step), and the step end an inference loop's last fetch makes."""
        events = []
        if self.chosen is None:
            best = self.best_lower()
            if best is not None:
                events.append(self.choose(best))
        if self._eval_start is not None:
            # An evaluation pass that nothing ended (the HF Trainer's last one, after the last step, has
            # no train() after it) ends with the run.
            events.extend(self.mode_changed(True, self.inst.now_ns()))
        last = self.ends["forward"][-1:] if self.chosen == "forward" else []
        if last and self.last_fetch > last[0]:
            # An inference loop over a DataLoader: the fetch after the last module call (the one that
            # ends the epoch) closes the last step, as it does for the batch source.
            events.append(StepEnded(self.last_fetch))
        return tuple(events)

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

    def mode_changed(self, training: bool, t: int) -> tuple:
        if not training and self._eval_start is None:
            self._eval_start = t
        elif training and self._eval_start is not None:
            self.eval_passes.append((self._eval_start, t))
            self._eval_start = None
            if self.chosen in ("optimizer", "backward"):
                return (EvalEnded(*self.eval_passes[-1]),)
        return NOTHING

    def grad_off_pass(self, t0: int, t1: int) -> tuple:
        """Module calls under a top-level no_grad()/inference_mode() and no step, or an epoch of another
        loader with no step between its batches: an evaluation pass, unless it sits inside a
        model.eval() pass already open."""
        if self._eval_start is not None:
            return NOTHING
        self._eval_start = t0
        return self.mode_changed(True, t1)

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
            from perfcore.report.words.runs import LOOKS_FOR  # the words, imported only to say them

            sys.stderr.write(
                f"perfcore: no step after {self.inst.watch_s:.0f} s of the script's CPU time. {LOOKS_FOR}\n"
            )
