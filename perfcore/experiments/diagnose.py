"""Stage 2, diagnose: differential experiments against the baseline, and the bottleneck named.

(A) synthetic data (batches already fetched, replayed from device memory: no loading at all),
(B) num_workers=0 (or, when the baseline already uses 0, as many workers as cores),
(C) the other decoder, where the workload declares one;
plus a profile of where __getitem__ spends its time in the main process (top functions).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Callable

from perfcore.analysis.advice import advise_run
from perfcore.analysis.checks import (
    MATERIAL_X,
    Against,
    Busy,
    Check,
    Experiment,
    Prediction,
    difference_noise_ms,
    prediction,
    reconcile,
)
from perfcore.analysis.checks import (
    Measurement as Measured,
)
from perfcore.analysis.codec import from_doc, to_doc
from perfcore.analysis.command_results import DiagnoseResult, ExperimentRow, Skipped, WorkerProfile
from perfcore.analysis.findings import Finding, FindingKind
from perfcore.analysis.results import Attributed, Loading, Verdict
from perfcore.analysis.run_report import Decision
from perfcore.analysis.status import Agreement, Change
from perfcore.analysis.verdict import decide, interference_of, run_evidence
from perfcore.errors import RunFailed
from perfcore.experiments.measurement import Measurement, Runner, Trial
from perfcore.experiments.runner import as_runner
from perfcore.workloads import Workload

__all__ = [
    "diagnose",
    "measured_first",
    "Run",
    "diagnose_verdict",
    "diagnose_advice",
    "SATURATED_CPU",
]

SATURATED_CPU = 90.0  # host CPU % above which __getitem__'s off-CPU time cannot be read as I/O


@dataclass(frozen=True)
class Run:
    """One row of diagnose's table: a measurement against the baseline's step (speedup = base / this),
    or the reason the experiment gave none."""

    experiment: Experiment
    name: str
    measurement: Measurement | None
    speedup: float | None
    error: str | None = None

    def row(self) -> ExperimentRow:
        if self.measurement is None:
            return ExperimentRow(self.experiment, self.name, float("nan"), None, error=self.error)
        row = self.measurement.row()
        f = row.get("interference") or {}
        busy = None
        if f.get("others_cores") is not None:  # what else used the machine during this experiment, measured
            busy = Busy(f["others_cores"], f.get("cores"), bool(f.get("material")))
        kept = {k: row.get(k) for k in ROW_KEYS}
        return from_doc(
            ExperimentRow,
            {
                **kept,
                "experiment": self.experiment.value,
                "name": self.name,
                "speedup": self.speedup,
                "interference": to_doc(busy),
            },  # fmt: skip
            "experiment",
        )


ROW_KEYS = (
    "batch_size",
    "num_workers",
    "pin_memory",
    "decoder",
    "synthetic",
    "step_ms",
    "samples_per_s",
    "busy_mean",
    "busy_std",
    "cpu_percent",
    "peak_mem_bytes",
    "oom",
    "breakdown_ms",
    "step_sem_ms",
    "steps",
)


def against(experiment: Experiment, name: str, m: Measurement, base_ms: float) -> Run:
    step = m.step_ms
    return Run(experiment, name, m, base_ms / step if step and step == step else None)


def diagnose(
    runner: Runner | Workload,
    *,
    steps: int = 30,
    warmup: int = 3,
    progress: Callable[[str], None] | None = None,
    baseline: Measurement | None = None,
) -> DiagnoseResult:
    """diagnose's one result (diagnose.json is its to_dict). baseline: a training run of the loop as it
    is, measured already: then diagnose predicts from that run, and its prediction is the one that run
    printed."""
    runner = as_runner(runner)
    say = progress or (lambda msg: None)
    if baseline is None:
        say("baseline")
        baseline = runner.measure(Trial(steps=steps, warmup=warmup, tag="baseline"))
    base, b_ms = baseline, baseline.step_ms
    runs = [baseline]
    exps = [against(Experiment.BASELINE, "baseline", base, b_ms)]
    say("A: synthetic data")
    runs.append(runner.measure(Trial(steps=steps, warmup=warmup, synthetic=True, tag="synthetic")))
    exps.append(against(Experiment.SYNTHETIC, "A: synthetic data", runs[-1], b_ms))
    workers = base.settings.get("num_workers") or 0
    b_over = {"num_workers": 0} if workers else {"num_workers": os.cpu_count() or 1}
    b_name = f"B: num_workers={b_over['num_workers']}" + ("" if workers else " (baseline uses 0)")
    say(b_name)
    try:
        runs.append(runner.measure(Trial(steps=steps, warmup=warmup, overrides=b_over, tag="workers")))
        exps.append(against(Experiment.WORKERS, b_name, runs[-1], b_ms))
    except RunFailed as e:  # the script could not run with these workers: said in its row
        exps.append(Run(Experiment.WORKERS, b_name, None, None, str(e)))
    skipped = []
    others = runner.other_decoders()
    if others:
        say(f"C: decoder {others[0]}")
        m = runner.measure(Trial(steps, warmup, decoder=others[0], tag="decoder"))
        exps.append(against(Experiment.DECODER, f"C: decoder {others[0]}", m, b_ms))
    else:
        skipped.append(Skipped("C: other decoder", runner.decoder_skip))
    say("worker profile")
    prof = runner.worker_profile(base)
    rows = [e.row() for e in exps]
    verdict, predicted = diagnose_verdict(base.row(), rows, prof, on_gpu=base.device.startswith("cuda"))
    findings, plan = None, None
    if base.run is not None:
        advised = diagnose_advice(base.run.to_dict(), verdict, base.evidence)
        findings, plan = measured_first(advised.findings, verdict, rows), advised.loader_plan
    failed = next((m.failure for m in runs if m.failure), None)
    return DiagnoseResult(
        workload=runner.name,
        device=base.device,
        experiments=tuple(rows),
        verdict=verdict,
        predicted_speedup=predicted,
        measured_speedup=rows[1].speedup,
        skipped=tuple(skipped),
        worker_profile=from_doc(WorkerProfile, prof, "worker_profile"),
        findings=None if findings is None else tuple(findings),
        loader_plan=plan,
        interference=interference_of(base.interference),
        # The first run whose script failed: its code is diagnose's, as run's is the script's.
        script_exit=failed.script_exit() if failed else None,
    )


def measured_first(findings: tuple[Finding, ...], verdict: Verdict, rows: list[ExperimentRow]) -> list[Finding]:
    """The findings after what the experiments measured (each a Check by analysis.checks.reconcile, offered
    by findings.offered_gain's two rules): a workers setting whose measured band experiment B found above 1x
    leads, as a change with its measured figure, whatever the bound the attribution set (a measurement
    outranks a model: where B passed it, the checks say what else changed, measured); a decoder change
    experiment C measured carries that measurement; loading advice no experiment of its own change measured
    carries what experiment A measured with no loading at all, the ceiling of any change to it. Advice no
    experiment measured keeps its order."""
    out = list(findings)
    b = next((c for c in verdict.checks if c.experiment is Experiment.WORKERS), None)
    if b is not None and b.num_workers is not None and b.above_1x:
        measured = dataclasses.replace(b, against=Against.ADVICE, status=None)
        cause = verdict.cause("load")
        level = cause.level if cause is not None else verdict.level
        figures = {"num_workers": b.num_workers, "speedup": b.measured_speedup, "experiment": b.name}
        found = Finding(
            FindingKind.WORKERS_MEASURED,
            level=level,
            cause="load",
            figures=figures,
            change={"num_workers": b.num_workers},
            checks=(measured,),
        )
        out.insert(0, found)
    base = rows[0]
    c = next((e for e in rows if e.experiment is Experiment.DECODER and e.speedup), None)
    a = next((e for e in rows if e.experiment is Experiment.SYNTHETIC and e.speedup), None)
    for i, f in enumerate(out):
        if c and f.kind is FindingKind.CHEAPER_BATCHES and f.figures.get("decode"):
            f = out[i] = dataclasses.replace(f, checks=f.checks + (_measured(Against.ADVICE, c, base, None),))
        offered = any(x.against is Against.ADVICE and x.above_1x for x in f.checks)
        g = f.gain
        if a and f.cause == "load" and not offered and g is not None:
            out[i] = dataclasses.replace(f, checks=f.checks + (_measured(Against.CEILING, a, base, g.speedup),))
    return out


def _measured(against: Against, e: ExperimentRow, base: ExperimentRow, predicted: float | None) -> Check:
    """What an experiment measured of a finding's change (ADVICE) or of removing its cause altogether
    (CEILING), with its band from both runs' spread where they report one, as reconcile holds it to the
    finding."""
    noise = difference_noise_ms(base.step_sem_ms, e.step_sem_ms)
    p = Prediction("load", float(base.step_ms or 0.0), 0.0, against=against, speedup=predicted)
    return reconcile(p, Measured(e.experiment, e.name, e.speedup, noise_ms=noise, compute_ms=_compute(base, e)))


def _compute(base: ExperimentRow, e: ExperimentRow) -> tuple[float, float] | None:
    """Compute per step in the baseline and in an experiment (the control: what else changed), where both
    runs attributed their steps."""
    b, x = (base.breakdown_ms or {}).get("compute"), (e.breakdown_ms or {}).get("compute")
    return (float(b), float(x)) if b is not None and x is not None else None


def diagnose_advice(base_doc: dict, verdict: Verdict, evidence: dict | None = None) -> Decision:
    """The baseline's run advised on diagnose's checked verdict, with experiment B as measured evidence: a
    workers change B measured not to help turns the advice round (analysis.advice.contradicting_trial)."""
    b = next((c for c in verdict.checks if c.experiment is Experiment.WORKERS), None)
    trials = []
    if b and b.num_workers is not None and b.measured_speedup:
        step = verdict.step_ms
        noise = b.measured_noise_ms
        trials.append(
            {
                "experiment": f"diagnose {b.name}",
                "num_workers": b.num_workers,
                "speedup": b.measured_speedup,
                "noise_share": (noise / step) if noise is not None and step else None,
            }
        )
    return advise_run(
        base_doc, zero_code=True, evidence={**dict(evidence or {}), "worker_trials": trials}, decision=verdict
    )


def diagnose_verdict(base: dict, exps: list[ExperimentRow], prof: dict, on_gpu: bool) -> tuple[Verdict, float | None]:
    """The one verdict on the baseline's attribution, then checked against experiment A: synthetic
    data removes loading, so its measured speedup confirms the predicted one (within both runs'
    noise) or, when it is partly or not confirmed, corrects what loading costs (and the verdict is
    decided again on that figure); inconclusive when the runs' noise is as large as the effect.
    Experiment B is held to the bound no change to the workers can pass: removing all loading.
    Returns (verdict, predicted speedup without loading)."""
    bd, step = base["breakdown_ms"], base["step_ms"]
    evidence = run_evidence(
        {
            "step_time_ms": {"mean": step},
            "breakdown_ms": bd,
            "breakdown_robust": base.get("breakdown_robust"),
            "device": "cuda" if on_gpu else "cpu",
            "steps": base.get("steps") or 0,
            "interference": base.get("interference"),
        }
    )
    # The attribution's prediction, checked before anything is decided: the verdict is decided once,
    # on the attribution or on what experiment A measured in its place.
    first = prediction(evidence)
    a = exps[1]
    a_bd = a.breakdown_ms or {}
    control = (bd.get("compute") or 0.0, a_bd["compute"]) if a_bd.get("compute") is not None else None
    noise = difference_noise_ms(base.get("step_sem_ms"), a.step_sem_ms)
    # Without loading, compute may truly get faster only where loading ran beside it on the same
    # cores (DataLoader workers on a CPU); otherwise a faster compute means the machine changed.
    concurrent = not on_gpu and bool(exps[0].num_workers)
    # The busier of the two runs as measured: only a measured busy machine may be blamed for a drift.
    mine = base.get("interference") or {}
    pair = (
        [Busy(mine["others_cores"], mine.get("cores"), bool(mine.get("material")))]
        if mine.get("others_cores") is not None
        else []
    )
    pair += [a.interference] if a.interference is not None and a.interference.others_cores is not None else []
    busy = max(pair, key=lambda f: f.others_cores) if pair else None
    band = first["avoidable_band_ms"].get("load")
    check = reconcile(
        Prediction(
            "load", first["step_ms"], float(first["avoidable_ms"].get("load") or 0.0), tuple(band) if band else None
        ),
        Measured(Experiment.SYNTHETIC, "synthetic data (no loading)", a.speedup, noise, control, concurrent, busy),
    )
    corrected = check.agrees is False
    attributed = None
    if corrected:
        final = decide(
            {**first["avoidable_ms"], "load": check.measured_ms},
            first["step_ms"],
            on_gpu=on_gpu,
            interference=base.get("interference"),
            measured_by={"load": "synthetic"},  # experiment A's saving replaces the attribution's figure
        )
        ms = float(first["avoidable_ms"].get("load") or 0.0)
        share = ms / first["step_ms"] if first["step_ms"] else 0.0
        attributed = Attributed("load", ms, share, tuple(band) if band else None)
    else:
        final = decide(**evidence)
    checks = [check]
    workers = next((e for e in exps if e.experiment is Experiment.WORKERS), None)
    if workers and workers.speedup:
        checks.append(workers_check(first, final, corrected, base, workers))
    loading = loading_cause(exps, prof, base.get("cpu_percent")) if final.bound == "load" else None
    final = dataclasses.replace(final, checks=tuple(checks), loading=loading, attributed=attributed)
    return final, check.predicted_speedup


def loading_cause(exps: list[ExperimentRow], prof: dict, cpu_percent: float | None) -> Loading:
    """What loading is, where diagnose can tell, from the experiments and __getitem__'s profile (its kind
    and the figures that tell it): "decoder" (experiment C measured the other decoder at MATERIAL_X or
    more), "unprofiled" (no CPU/wall ratio), "crowded" (off-CPU 50-80% of the time on a host over
    SATURATED_CPU: waiting for a core as much as for I/O), "io" (off-CPU over half the time), "cpu" (on-CPU:
    decode/augment, with the top function)."""
    decoder = next((e for e in exps if e.experiment is Experiment.DECODER), None)
    if decoder and (decoder.speedup or 0) >= MATERIAL_X:
        return Loading("decoder", decoder=decoder.decoder, speedup=decoder.speedup)
    ratio = prof.get("cpu_to_wall")
    if ratio is None:
        return Loading("unprofiled")
    if 0.2 <= ratio < 0.5 and (cpu_percent or 0) >= SATURATED_CPU:
        # Off-CPU time on a saturated host is waiting for a core as much as for storage (below 20%
        # on a CPU, even a crowded host leaves no doubt that it waits on something else).
        return Loading("crowded", cpu_to_wall=ratio, cpu_percent=cpu_percent)
    if ratio < 0.5:
        return Loading("io", cpu_to_wall=ratio)
    top = prof["top"][0]["function"] if prof.get("top") else None
    return Loading("cpu", cpu_to_wall=ratio, top=top)


def workers_check(first: dict, final: Verdict, corrected: bool, base: dict, workers: ExperimentRow) -> Check:
    """Experiment B (the workers changed) held to the bound no worker setting can pass: the step with no
    loading at all (the prediction `first`, or experiment A's measurement when it `corrected` it)."""
    step = float(first["step_ms"])
    load_ms = float(final.avoidable_ms.get("load") or 0.0)
    band = None if corrected else (first.get("avoidable_band_ms") or {}).get("load")
    noise = difference_noise_ms(base.get("step_sem_ms"), workers.step_sem_ms)
    b, x = (base.get("breakdown_ms") or {}).get("compute"), (workers.breakdown_ms or {}).get("compute")
    control = (float(b), float(x)) if b is not None and x is not None else None
    return reconcile(
        Prediction("load", step, load_ms, tuple(band) if band else None, Against.BOUND),
        Measured(
            Experiment.WORKERS,
            workers.name,
            workers.speedup,
            noise_ms=noise,
            compute_ms=control,
            num_workers=workers.num_workers,
        ),
    )
