"""StepTimer: time a training loop you own, with almost no code and almost no overhead.

    timer = perfcore.StepTimer(device="cuda", warmup=5)
    for x, y in timer.load(loader):              # times the wait for each batch
        with timer.transfer():
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        with timer.compute():
            loss = loss_fn(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
        timer.step()
    timer.report()

No step is ever synchronized: host phases are recorded natively, GPU phases by CUDA events (or
CUPTI kernel records with kernels=True) resolved lazily. The recording itself lives in
perfcore.recording; StepTimer is the part a user calls.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Iterator

from perfcore._lazy import lazy_module
from perfcore.analysis.run_report import RunReport
from perfcore.errors import UsageError
from perfcore.recording.engine import BUILTIN, STEP_ON, Recording, TimedLoader

pd = lazy_module("pandas")  # imported on first use: settling needs it, recording does not

__all__ = ["StepTimer", "RunResult"]


class RunResult(RunReport):
    """A run's typed result (analysis.run_report.RunReport) that renders itself in Jupyter and Colab, and as
    the terminal's report when printed. to_dict() is its perfcore.run/2 document."""

    def _repr_html_(self) -> str:
        from perfcore.report.html import render_html

        return render_html(self)

    def __str__(self) -> str:
        from perfcore.report.terminal import render_text

        return render_text(self)

    @classmethod
    def of(cls, report: RunReport) -> "RunResult":
        return cls(**{f.name: getattr(report, f.name) for f in dataclasses.fields(report)})


class StepTimer:
    """Per-step attribution of a custom loop to load / transfer / compute / comm / host.

    device: "cuda", "cpu" or "auto" (cuda when a GPU is usable). warmup: the first steps,
    reported apart. kernels: trace kernels and copies with CUPTI (CUDA only), through
    kernel_backend "native", "cupti-python", or "auto" (native, else cupti-python, else CUDA
    events; what was used is `backend`, why in `notes`); True traces kernels, copies and memsets
    only ("lean"), "full" adds CUPTI's API records (perfcore.recording.tracing). stream: the CUDA
    stream phases are timed on (default: the current stream when the timer is made).
    step_on: what ends a step. "step" (default): each timer.step(). "batch": each batch fetched
    through timer.load() after the first ends the step before it, so the loop needs no
    timer.step(). "optimizer": each torch.optim optimizer step (the first optimizer to step is the
    clock; a GAN's second optimizer is part of the same step).

    Phases: `with timer.load(...)`, `timer.transfer()`, `timer.compute()`, `timer.comm()`, and
    `timer.phase(name, label)` for your own; each also works as a decorator.
    """

    STEP_ON = STEP_ON

    def __init__(
        self,
        device: str = "auto",
        warmup: int = 5,
        kernels: bool = False,
        stream: Any = None,
        step_on: str = "step",
        kernel_backend: str = "auto",
    ):
        if isinstance(warmup, bool) or not isinstance(warmup, int):
            raise UsageError(
                f"StepTimer(warmup=...): {str(warmup)[:40]!r} is not a whole number of steps; "
                "give an int such as 5 (0 reports every step)"
            )
        self.engine = Recording(device, warmup, kernels, stream, step_on, kernel_backend)
        # The built-in phases are attributes holding native scopes: timer.compute() returns the
        # scope itself (one C call), and `with` enters it in C.
        self.transfer = self.engine.make_scope("transfer", BUILTIN["transfer"], "transfer")
        self.compute = self.engine.make_scope("compute", BUILTIN["compute"], "compute")
        self.comm = self.engine.make_scope("comm", BUILTIN["comm"], "comm")
        # step() is called once per step in the user's loop: bound straight to the engine's, so the
        # facade adds no Python frame (the method below documents it for help()).
        self.step = self.engine.step

    @property
    def device(self) -> str:
        """ "cuda" or "cpu": where the phases are timed."""
        return self.engine.device

    @property
    def warmup(self) -> int:
        """How many first steps are reported apart."""
        return self.engine.warmup

    @property
    def step_on(self) -> str:
        """What ends a step: "step", "batch" or "optimizer"."""
        return self.engine.step_on

    @property
    def backend(self) -> str:
        """How the GPU was timed: "events", "native-cupti", "cupti-python", or "host" on CPU."""
        return self.engine.backend

    @property
    def notes(self) -> list[str]:
        """What perfcore fell back from or noticed (a CUPTI that could not start, a GPU followed)."""
        return self.engine.notes

    @property
    def steps(self) -> int:
        """Steps ended so far."""
        return self.engine.steps

    def phase(self, name: str, label: str = "host"):
        """A custom phase, reported under its own name and counted in `label` (default host).

        Use as `with timer.phase("augment"):` or as a decorator `@timer.phase("augment")`.
        Each name is a column kept for every step: past 512 distinct names (a name made per step,
        f"step{i}"), new names are counted together as "other_phases" ("other_<label>_phases"),
        said once in a warning and in `notes`; their time stays in `label`.
        """
        return self.engine.phase(name, label)

    def load(self, iterable: Iterable) -> Iterator:
        """Wrap a DataLoader (or any iterable): each batch fetch is timed as `load`."""
        return TimedLoader(self.engine, iterable)

    def step(self) -> None:
        """End the current step. Every phase opened on this thread must be closed by now."""
        self.engine.step()

    def summary(self) -> pd.DataFrame:
        """One row per completed step: step, wall_ms, load_ms, transfer_ms, compute_ms, comm_ms,
        host_ms (the five sum to wall_ms), warmup, and <custom phase>_ms for custom phases."""
        return self.engine.summary()

    def result(self, top_kernels: int = 10, *, evaluation_rows=None, settle: bool = True) -> RunResult:
        """The run so far, decided (its verdict and findings) on the steps so far; `evaluation_rows` are set
        apart from the training steps' statistics; settle=False: summary() just settled them."""
        from perfcore.analysis.advice import advise_run

        facts = self.engine.document(top_kernels, settle=settle, evaluation_rows=evaluation_rows)
        decision = advise_run(facts, zero_code=False) if facts["steps"] else None
        return RunResult.of(RunReport.of(facts, decision))

    def report(self, file=None) -> RunResult:
        """Print the terminal report (per-label mean, share, bar; verdict; advice) and return the result."""
        res = self.result()
        print(str(res), file=file)
        return res

    def close(self) -> None:
        """Stop CUPTI tracing if this timer started it (also done by `with StepTimer(...)`)."""
        self.engine.close()

    def __enter__(self) -> "StepTimer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
