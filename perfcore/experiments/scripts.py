"""The runner for an unmodified script: each measurement runs the command under `perfcore run` with
DataLoader settings changed from outside (the child configuration's dl_overrides) and, for synthetic
data, batches already fetched replayed instead of loaded (its synthetic)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from perfcore.analysis.checks import step_sem_ms
from perfcore.analysis.run_report import RunReport
from perfcore.errors import RunFailed, UsageError
from perfcore.analysis.command_results import ScriptExit, WorkerProfile
from perfcore.experiments.measurement import SETTINGS, Interrupted, Measurement, Settings, Trial
from perfcore.report.words.runs import exit_sentence, outcome_sentence
from perfcore.run.parent.finish import finish_run
from perfcore.run.parent.folder import prepare_out
from perfcore.run.parent.command import check_command
from perfcore.run.parent.launch import RunSettings, child_config, run_instrumented

__all__ = ["ScriptRunner", "script_run", "script_document", "script_measurement", "script_failure"]

SYNTHETIC_KEEP = 8
# Diagnose's runs, as a failure names them (a sweep's configurations are named by their row).
DIAGNOSE_RUNS = ("baseline", "synthetic", "workers")
NO_LOADER = "the script built no torch DataLoader, so its settings cannot be changed from outside"


def script_document(cmd: list[str], out: Path, trial: Trial) -> tuple[RunReport, Any, Path]:
    """One run of the command under `perfcore run`: the run (what the script made, its loaders, measured
    steps or not), the sampler's frame where the trial asked for one, and its folder."""
    check_command(cmd)
    out = prepare_out(out)
    warmup = trial.warmup
    if trial.synthetic:
        # The first SYNTHETIC_KEEP batches are really loaded (to be replayed): keep them in warm-up.
        warmup = max(warmup, SYNTHETIC_KEEP)
    sampler = None
    if trial.interval_s:
        from perfcore.capture.sampler import Sampler

        sampler = Sampler(trial.interval_s).start()
    overrides = dict(trial.overrides) if trial.overrides else None
    try:
        # Each trial stops at its steps by design: the triage's own progress line names the trial.
        settings = RunSettings(steps=trial.steps, warmup=warmup, stop_line=False)
        synthetic = SYNTHETIC_KEEP if trial.synthetic else 0
        config = child_config(out, settings, dl_overrides=overrides, synthetic=synthetic)
        rc = run_instrumented(cmd, config)
    finally:
        frame = sampler.stop() if sampler else None
    return finish_run(out, rc, cmd), frame, out


def script_run(cmd: list[str], out: Path, trial: Trial) -> Measurement:
    """One run of the command under `perfcore run`, measured."""
    doc, frame, out = script_document(cmd, out, trial)
    if trial.overrides and (doc.dataloader_overrides is None or doc.dataloader_overrides.applied == 0):
        raise UsageError(NO_LOADER)
    # The steps table crosses from the child through the run folder (the processes' protocol is files)
    # and finish_run hands back only the document: the table is read here, once, for the busy series
    # and the step's standard error.
    import pandas as pd

    steady = pd.read_csv(out / "steps.csv")
    steady = steady[~steady["warmup"]]
    if frame is not None and "gpu_util" in frame:
        busy, source = frame["gpu_util"].to_numpy(dtype=float), "gpu_util"
    else:
        busy, source = (steady["compute_ms"] / steady["wall_ms"]).to_numpy(dtype=float), "compute_share"
    cpu = float(frame["cpu_percent"].mean()) if frame is not None and len(frame) else doc.cpu_util_percent
    return script_measurement(
        doc, busy, source, cpu, step_sem_ms(steady["wall_ms"].to_numpy()), trial, spacing_s=trial.interval_s
    )


def script_measurement(
    doc: RunReport,
    busy: Any,
    source: str,
    cpu_percent: float | None,
    sem_ms: float | None,
    trial: Trial,
    spacing_s: float | None = None,
) -> Measurement:
    """A script's run and its busy series, as a measurement."""
    asked = doc.dataloader_overrides.asked if doc.dataloader_overrides is not None else {}
    w = doc.workers
    # The batch size asked for, else what the workers' profile saw, else the training loader's own (a run
    # whose workers were not profiled has no items_per_batch: its samples/s read 0).
    loader = next((ld for ld in doc.loaders if ld.training), None)
    bs = asked.get("batch_size") or (w.items_per_batch if w else None) or (loader.batch_size if loader else None)
    # The settings the run was asked for; the rest as it had them, where it says (the workers).
    settings = {"num_workers": w.num_workers if w else None, **{k: asked[k] for k in SETTINGS if k in asked}}
    step = doc.step_time_ms.mean
    return Measurement(
        device=doc.device,
        steps=doc.steps,
        step_ms=step if step else float("nan"),
        settings=Settings(**{**settings, "batch_size": bs}),
        step_sem_ms=sem_ms,
        samples_per_s=(bs or 0) / step * 1e3 if step else 0.0,
        busy_source=source,
        busy_series=tuple(map(float, busy)),
        busy_spacing_s=(spacing_s or 0.0) if source == "gpu_util" else (step or 0.0) / 1e3,
        cpu_percent=cpu_percent,
        peak_mem_bytes=doc.memory.peak_bytes if doc.memory is not None else None,
        breakdown_ms=doc.breakdown_ms.as_dict(),
        breakdown_fraction=doc.breakdown_fraction.as_dict(),
        synthetic=trial.synthetic,
        failure=script_failure(doc, trial),
        ended=_ended(doc),
        exit_code=int(doc.exit_code or 0),
        run=doc,
    )


def _ended(doc: RunReport) -> str | None:
    """How the script's run ended, in words (a sweep's row keeps them)."""
    if doc.exit is not None and doc.outcome is not None:
        return exit_sentence(doc.exit, doc.outcome)
    return outcome_sentence(doc.outcome) if doc.outcome is not None else None


def script_failure(doc: RunReport, trial: Trial) -> ScriptExit | None:
    """The script failed after measured steps (crashed, exited non-zero, killed): the facts of it; None when
    it finished or --steps stopped it."""
    rc = doc.exit_code or 0
    if not rc:
        return None
    run = trial.tag if trial.tag in DIAGNOSE_RUNS else None
    return ScriptExit(
        int(rc),
        steps=doc.steps,
        run=run,
        settings=dict(trial.overrides or {}) if run == "workers" else None,
        oom="out of memory" in str(doc.exit.exception if doc.exit else "").lower(),
        exit=doc.exit,
        outcome=doc.outcome,
    )


def _interrupted(rc: int) -> bool:
    """The child ended on Ctrl-C (SIGINT reaches it first: same process group): 128+2, or Python's 130."""
    return rc in (130, -2)


class ScriptRunner:
    """A command measured under `perfcore run`, one run folder per measurement (tag names it)."""

    forward_only = False
    health_note = "script_loop"
    decoder_skip = "script_decoders"

    def __init__(self, cmd: list[str], out: Path) -> None:
        self.cmd = list(cmd)
        self.out = Path(out)
        self.name = " ".join(self.cmd)
        self.target = "-- " + self.name
        self._own: dict[str, Any] | None = None

    def measure(self, trial: Trial, progress: Callable[[int, int], None] | None = None) -> Measurement:
        """RunFailed when the script failed with nothing to report; Interrupted on Ctrl-C."""
        if trial.overrides:  # None: the script's own value, left as it is
            trial = replace(trial, overrides={k: v for k, v in trial.overrides.items() if v is not None})
        try:
            m = script_run(self.cmd, self.out / trial.tag, trial)
        except RunFailed as e:
            if _interrupted(e.exit_code):
                raise Interrupted() from e
            raise
        if m.failure is not None and _interrupted(m.failure.code):
            raise Interrupted()
        return m

    def own_settings(self) -> dict[str, Any]:
        """The script's own training DataLoader settings (and its site), from one short run with nothing
        replaced; measured once."""
        if self._own is None:
            doc, _, _ = script_document(self.cmd, self.out / "script_settings", Trial(steps=1, warmup=0))
            loaders = doc.loaders
            ld = next((x for x in loaders if x.training), loaders[0] if loaders else None)
            if ld is None:
                raise UsageError(NO_LOADER)
            self._own = {**{k: getattr(ld, k) for k in SETTINGS}, "site": ld.site}
        return self._own

    def other_decoders(self) -> list[str]:
        return []

    def worker_profile(self, baseline: Measurement) -> WorkerProfile:
        """A script's workers are timed per batch (__getitem__ vs collate) by `perfcore run`."""
        w = baseline.run.workers if baseline.run is not None else None
        if w is None:
            return WorkerProfile(items=0, ms_per_item=0.0, note="timed_per_batch")
        per_item = w.getitem_ms_mean / max(1.0, w.items_per_batch or 1)
        return WorkerProfile(items=int(w.batches or 0), ms_per_item=per_item, note="timed_per_batch")
