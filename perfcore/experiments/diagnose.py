"""Stage 2, diagnose: differential experiments against the baseline, and the bottleneck named.

(A) synthetic data (batches already fetched, replayed from device memory: no loading at all),
(B) num_workers=0 (or, when the baseline already uses 0, as many workers as cores),
(C) the other decoder, where the workload declares one;
plus a profile of where __getitem__ spends its time in the main process (top functions).
"""

from __future__ import annotations

import dataclasses
import os
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
    reconcile,
)
from perfcore.analysis.checks import (
    Measurement as Measured,
)
from perfcore.analysis.command_results import DiagnoseResult, ExperimentRow, Skipped, WorkerProfile
from perfcore.analysis.findings import Finding, FindingKind
from perfcore.analysis.results import Attributed, Interference, Loading, Verdict
from perfcore.analysis.run_report import Decision, RunReport
from perfcore.analysis.verdict import decide, judge
from perfcore.errors import RunFailed
from perfcore.experiments.measurement import Measurement, Runner, Trial
from perfcore.experiments.runner import as_runner
from perfcore.workloads import Workload

__all__ = [
    "diagnose",
    "measured_first",
    "experiment_row",
    "diagnose_verdict",
    "diagnose_advice",
    "SATURATED_CPU",
]

SATURATED_CPU = 90.0  # host CPU % above which __getitem__'s off-CPU time cannot be read as I/O


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
    measured = [baseline]
    rows = [experiment_row(Experiment.BASELINE, "baseline", baseline, baseline.step_ms)]

    def run(experiment: Experiment, name: str, trial: Trial) -> None:
        say(name)
        measured.append(runner.measure(trial))
        rows.append(experiment_row(experiment, name, measured[-1], baseline.step_ms))

    run(Experiment.SYNTHETIC, "A: synthetic data", Trial(steps, warmup, synthetic=True, tag="synthetic"))
    workers = baseline.settings.num_workers or 0
    b_workers = 0 if workers else os.cpu_count() or 1
    b_name = f"B: num_workers={b_workers}" + ("" if workers else " (baseline uses 0)")
    try:
        run(Experiment.WORKERS, b_name, Trial(steps, warmup, overrides={"num_workers": b_workers}, tag="workers"))
    except RunFailed as e:  # the script could not run with these workers: said in its row
        rows.append(ExperimentRow(Experiment.WORKERS, b_name, float("nan"), error=str(e)))
    skipped = ()
    others = runner.other_decoders()
    if others:
        run(Experiment.DECODER, f"C: decoder {others[0]}", Trial(steps, warmup, decoder=others[0], tag="decoder"))
    else:
        skipped = (Skipped("C: other decoder", runner.decoder_skip),)
    say("worker profile")
    prof = runner.worker_profile(baseline)
    verdict, predicted = diagnose_verdict(baseline, rows, prof)
    findings, plan = None, None
    if baseline.run is not None:
        advised = diagnose_advice(baseline.run, verdict)
        findings, plan = tuple(measured_first(advised.findings, verdict, rows)), advised.loader_plan
    return DiagnoseResult(
        workload=runner.name,
        device=baseline.device,
        experiments=tuple(rows),
        verdict=verdict,
        predicted_speedup=predicted,
        measured_speedup=rows[1].speedup,
        skipped=skipped,
        worker_profile=prof,
        findings=findings,
        loader_plan=plan,
        interference=baseline.interference,
        # The first run whose script failed: its code is diagnose's, as run's is the script's.
        script_exit=next((m.failure for m in measured if m.failure), None),
    )


def experiment_row(experiment: Experiment, name: str, m: Measurement, base_ms: float) -> ExperimentRow:
    """One row of diagnose's table: a measurement against the baseline's step (speedup = base / this) and
    what else used the machine during it, measured."""
    s, step = m.settings, m.step_ms
    return ExperimentRow(
        experiment,
        name,
        step,
        base_ms / step if step and step == step else None,
        s.batch_size,
        s.num_workers,
        s.pin_memory,
        decoder=m.decoder,
        synthetic=m.synthetic,
        samples_per_s=m.samples_per_s,
        busy_mean=m.busy_mean,
        busy_std=m.busy_std,
        cpu_percent=m.cpu_percent,
        peak_mem_bytes=m.peak_mem_bytes,
        oom=m.oom,
        breakdown_ms=dict(m.breakdown_ms),
        step_sem_ms=m.step_sem_ms,
        steps=m.steps,
        interference=_busy(m.interference),
    )


def _busy(f: Interference | None) -> Busy | None:
    """Other processes' cores during a run, where it was measured."""
    return Busy(f.others_cores, f.cores, f.material) if f is not None and f.others_cores is not None else None


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
            f = out[i] = dataclasses.replace(f, checks=f.checks + (_checked(Against.ADVICE, c, base, None),))
        offered = any(x.against is Against.ADVICE and x.above_1x for x in f.checks)
        g = f.gain
        if a and f.cause == "load" and not offered and g is not None:
            out[i] = dataclasses.replace(f, checks=f.checks + (_checked(Against.CEILING, a, base, g.speedup),))
    return out


def _checked(against: Against, e: ExperimentRow, base: ExperimentRow, predicted: float | None) -> Check:
    """What an experiment measured of a finding's change (ADVICE) or of removing its cause altogether
    (CEILING), as reconcile holds it to the finding."""
    p = Prediction("load", float(base.step_ms or 0.0), 0.0, against=against, speedup=predicted)
    return reconcile(p, _measured(e, base))


def _measured(e: ExperimentRow, base: Measurement | ExperimentRow, name: str | None = None, **more) -> Measured:
    """What experiment `e` measured against the baseline: its speedup, with its band from both runs' spread
    where they report one, and compute per step in both (the control: what else changed) where both runs
    attributed their steps."""
    b, x = (base.breakdown_ms or {}).get("compute"), (e.breakdown_ms or {}).get("compute")
    control = (float(b), float(x)) if b is not None and x is not None else None
    noise = difference_noise_ms(base.step_sem_ms, e.step_sem_ms)
    return Measured(e.experiment, name or e.name, e.speedup, noise, control, **more)


def diagnose_advice(run: RunReport, verdict: Verdict) -> Decision:
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
    return advise_run(run.to_dict(), zero_code=True, evidence={"worker_trials": trials}, decision=verdict)


def diagnose_verdict(base: Measurement, exps: list[ExperimentRow], prof: WorkerProfile) -> tuple[Verdict, float | None]:
    """The one verdict on the baseline's attribution, then checked against experiment A: synthetic
    data removes loading, so its measured speedup confirms the predicted one (within both runs'
    noise) or, when it is partly or not confirmed, corrects what loading costs (and the verdict is
    decided again on that figure); inconclusive when the runs' noise is as large as the effect.
    Experiment B is held to the bound no change to the workers can pass: removing all loading.
    Returns (verdict, predicted speedup without loading)."""
    evidence = base.verdict_evidence()
    on_gpu = evidence.on_gpu
    # The attribution's prediction, checked before anything is decided: the verdict is decided once,
    # on the attribution or on what experiment A measured in its place.
    p = evidence.prediction("load")
    a = exps[1]
    # Without loading, compute may truly get faster only where loading ran beside it on the same
    # cores (DataLoader workers on a CPU); otherwise a faster compute means the machine changed.
    concurrent = not on_gpu and bool(base.settings.num_workers)
    # The busier of the two runs as measured: only a measured busy machine may be blamed for a drift.
    pair = [f for f in (_busy(base.interference), a.interference) if f is not None and f.others_cores is not None]
    busy = max(pair, key=lambda f: f.others_cores, default=None)
    check = reconcile(p, _measured(a, base, "synthetic data (no loading)", compute_may_gain=concurrent, busy=busy))
    corrected = check.agrees is False
    attributed = None
    if corrected:
        final = decide(
            {**evidence.avoidable_ms, "load": check.measured_ms},
            p.step_ms,
            on_gpu=on_gpu,
            interference=evidence.interference,
            measured_by={"load": "synthetic"},  # experiment A's saving replaces the attribution's figure
        )
        attributed = Attributed("load", p.saved_ms, p.saved_ms / p.step_ms if p.step_ms else 0.0, p.saved_band_ms)
    else:
        final = judge(evidence)
    checks = [check]
    workers = next((e for e in exps if e.experiment is Experiment.WORKERS), None)
    if workers and workers.speedup:
        checks.append(workers_check(p, final, corrected, base, workers))
    loading = loading_cause(exps, prof, base.cpu_percent) if final.bound == "load" else None
    final = dataclasses.replace(final, checks=tuple(checks), loading=loading, attributed=attributed)
    return final, check.predicted_speedup


def workers_check(p: Prediction, final: Verdict, corrected: bool, base: Measurement, workers: ExperimentRow) -> Check:
    """Experiment B (the workers changed) held to the bound no worker setting can pass: the step with no
    loading at all (the prediction `p`, or experiment A's measurement when it `corrected` it)."""
    load = final.cause("load")
    bound = dataclasses.replace(
        p,
        saved_ms=load.ms_per_step if load is not None else 0.0,
        saved_band_ms=None if corrected else p.saved_band_ms,
        against=Against.BOUND,
    )
    return reconcile(bound, _measured(workers, base, num_workers=workers.num_workers))


def loading_cause(exps: list[ExperimentRow], prof: WorkerProfile, cpu_percent: float | None) -> Loading:
    """What loading is, where diagnose can tell, from the experiments and __getitem__'s profile (its kind
    and the figures that tell it): "decoder" (experiment C measured the other decoder at MATERIAL_X or
    more), "unprofiled" (no CPU/wall ratio), "crowded" (off-CPU 50-80% of the time on a host over
    SATURATED_CPU: waiting for a core as much as for I/O), "io" (off-CPU over half the time), "cpu" (on-CPU:
    decode/augment, with the top function)."""
    decoder = next((e for e in exps if e.experiment is Experiment.DECODER), None)
    if decoder and (decoder.speedup or 0) >= MATERIAL_X:
        return Loading("decoder", decoder=decoder.decoder, speedup=decoder.speedup)
    ratio = prof.cpu_to_wall
    if ratio is None:
        return Loading("unprofiled")
    if 0.2 <= ratio < 0.5 and (cpu_percent or 0) >= SATURATED_CPU:
        # Off-CPU time on a saturated host is waiting for a core as much as for storage (below 20%
        # on a CPU, even a crowded host leaves no doubt that it waits on something else).
        return Loading("crowded", cpu_to_wall=ratio, cpu_percent=cpu_percent)
    if ratio < 0.5:
        return Loading("io", cpu_to_wall=ratio)
    return Loading("cpu", cpu_to_wall=ratio, top=prof.top[0].function if prof.top else None)
