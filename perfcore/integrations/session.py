"""perfcore run's zero-code instrumentation inside this process, for a trainer callback: start it,
mark the trainer's step numbers as steps end, read the settled figures while it runs, finish."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from perfcore.run.protocol import ChildConfig

__all__ = ["Session", "CallbackState"]


class Session:
    def __init__(self, warmup: int = 5, out: str | os.PathLike | None = None):
        self.warmup = warmup
        self.out = Path(out) if out is not None else None
        self.inst = None
        self.marks: list[tuple[int, int]] = []  # (perfcore steps ended so far, the trainer's step number)
        self.result = None
        self.steps = None
        self.run_dir: Path | None = None  # the session's own folder (progress files), removed at finish

    def start(self) -> "Session":
        from perfcore.run.child import instrument

        # Built here, never set in the trainer's environment: the training process keeps its own variables.
        self.run_dir = Path(tempfile.mkdtemp(prefix="perfcore-trainer-"))
        config = ChildConfig(run_dir=str(self.run_dir), warmup=self.warmup)
        if instrument.STATE is None:
            instrument.activate(config, process_hooks=False)  # no exit or signal handlers: the trainer owns them
        self.inst = instrument.STATE
        self.inst.ensure_installed()
        self.inst.new_cell(config)
        return self

    @property
    def engine(self):
        """The recording under the instrumentation's timer (None before start and after finish)."""
        timer = self.inst.timer if self.inst is not None else None
        return timer.engine if timer is not None else None

    def mark(self, trainer_step: int) -> None:
        """The trainer finished its step `trainer_step`: the steps perfcore ended so far belong to it."""
        e = self.engine
        if e is not None:
            self.marks.append((len(e.boundaries), int(trainer_step)))

    def live(self) -> dict[str, float]:
        """The settled steps' figures so far (cheap: running sums), as summary() keys without prefix."""
        from perfcore.analysis.attribution import LABELS

        e = self.engine
        if e is None:
            return {}
        tot = e.settled_totals()
        steps = float(len(e.boundaries) - len(self.inst.eval_rows))  # an evaluation pass is no step
        if not tot["measured"]:
            return {"steps": steps}
        step_ms = tot["wall_ns"] / tot["measured"] / 1e6
        out = {"steps": steps, "step_ms": step_ms}
        for lb in LABELS:
            ms = tot["ns"][lb] / tot["measured"] / 1e6
            out[f"{lb}_ms"], out[f"{lb}_share"] = ms, (ms / step_ms if step_ms else 0.0)
        return out

    def finish(self):
        """Stops timing; returns the perfcore.run/1 result (a RunResult) or None when no step was seen.
        The per-step table (self.steps) carries the trainer's own step number as `trainer_step`."""
        inst = self.inst
        if inst is None:
            return None
        timer, _ = inst.end_cell()  # the hooks call straight through from now on
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)  # perfcore's own folder: nothing of it is kept
            self.run_dir = None
        try:
            source = inst.finish_sources() if timer is not None else None
        finally:
            # torch as it was: every patch off (torch.compile cannot trace through perfcore's hooks)
            inst.torch_hooks.uninstall()
        if timer is None:
            return None
        timer.engine.close_open_phases()
        if not timer.engine.boundaries:
            timer.close()
            return None
        # The trainer's evaluations (evaluate() between steps) are rows of their own: set apart from
        # the training steps' statistics as `perfcore run` sets them apart, and no trainer step.
        evaluation = list(inst.eval_rows)
        table = timer.summary()
        res = dataclasses.replace(timer.result(evaluation_rows=evaluation, settle=False), step_source=source)
        timer.close()
        table["evaluation"] = np.isin(np.arange(len(table)), evaluation)
        table["trainer_step"] = np.where(table["evaluation"], -1, trainer_steps(len(table), self.marks))
        self.result, self.steps = res, table
        if self.out is not None:
            self.write(self.out)
        return res

    def write(self, out: Path) -> Path:
        """run.json, steps.csv and report.html of the trained run into `out` (made if missing)."""
        from perfcore import jsonio
        from perfcore.report.html import write_report

        out.mkdir(parents=True, exist_ok=True)
        files = {"run.json": "run.json", "steps.csv": "steps.csv", "report.html": "report.html"}
        run = dataclasses.replace(self.result, files=files)
        jsonio.write_csv(out / "steps.csv", self.steps)  # atomic, and never through a planted link
        jsonio.write(out / "run.json", run.to_dict())
        write_report(out, run, self.steps)
        return out


def trainer_steps(n: int, marks: list[tuple[int, int]]) -> np.ndarray:
    """The trainer's step number of each of n perfcore steps: that of the first mark made after the
    step ended (-1 for steps after the last mark)."""
    if not marks:
        return np.full(n, -1, dtype=np.int64)
    ended = np.array([m[0] for m in marks], dtype=np.int64)
    number = np.array([m[1] for m in marks], dtype=np.int64)
    k = np.searchsorted(ended, np.arange(n) + 1, side="left")  # first mark that had seen step i end
    out = np.full(n, -1, dtype=np.int64)
    ok = k < len(marks)
    out[ok] = number[k[ok]]
    return out


class CallbackState:
    """What both trainer callbacks hold: the session, the metric prefix, and the results once training ends."""

    def __init__(self, warmup: int = 5, out: str | None = None, prefix: str = "perfcore/"):
        self.session = Session(warmup, out)
        self.prefix = prefix
        self.result = None
        self.steps = None
        self.summary: dict = {}

    def finish_session(self) -> bool:
        """Ends the session once: True where it saw steps (the run's result, its steps and the summary to log
        are then kept)."""
        if self.result is not None:
            return False
        from perfcore.report.summary import summary

        res = self.session.finish()
        if res is None:
            return False
        self.result, self.steps = res, self.session.steps
        self.summary = summary(res, prefix=self.prefix, numeric=True)
        return True
