"""`perfcore demo`: health + run + diagnose on the built-in `demo` workload, into one report folder."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from perfcore.analysis.command_results import DemoResult, DemoWorkload
from perfcore import jsonio
from perfcore.report.summary import demo_markdown

__all__ = ["run_demo"]


def run_demo(out: Path, quick: bool = False, progress=None) -> DemoResult:
    """The demo's one result (demo.json is its to_dict), its files written into `out`."""
    from perfcore.experiments.diagnose import diagnose
    from perfcore.experiments.health import health
    from perfcore.experiments.measurement import Trial
    from perfcore.experiments.runner import WorkloadRunner
    from perfcore.report.plots import plot_breakdown, plot_experiments
    from perfcore.report.words.verdict import verdict_short
    from perfcore.workloads import load_workload

    t0 = time.perf_counter()
    say = progress.stage if progress else (lambda m: None)
    steps_cb = progress.steps if progress else None
    say("preparing the demo workload (JPEGs are made once and cached)")
    w = load_workload("demo")
    runner = WorkloadRunner(w, "demo")
    say("health: next batch -> forward -> loss")
    # The demo decides one verdict, at its end, where all of its evidence exists: health and run are
    # measured without deciding, and diagnose decides on the run checked by its experiments.
    h = health(runner, steps=30 if quick else 100, warmup=3, progress=steps_cb, decide=False)
    say("run: training steps, attributed")
    run = runner.measure(Trial(steps=15 if quick else 40, warmup=3), steps_cb)
    say("diagnose: synthetic data, workers, decoder")
    # Diagnose's baseline is the run just measured: one measurement, so the gain run predicts for
    # removing loading is the one diagnose checks with synthetic data, not a second estimate of it.
    d = diagnose(runner, steps=8 if quick else 25, warmup=2, progress=say, baseline=run)
    # One decision: the run's verdict is diagnose's (the run checked by experiment A); health measured
    # a forward-only loop and decides nothing of its own.
    run_doc = dataclasses.replace(
        run.run, workload=w.name, verdict=d.verdict, findings=d.findings or (), loader_plan=d.loader_plan
    )
    jsonio.write(out / "health.json", h.to_dict())
    jsonio.write(out / "run.json", run_doc.to_dict())
    jsonio.write_csv(out / "steps.csv", run.table)
    jsonio.write(out / "diagnose.json", d.to_dict())
    plot_breakdown(run.table, out / "breakdown.png", title=verdict_short(run_doc.verdict))
    plot_experiments(d.experiments, out / "experiments.png", title=verdict_short(d.verdict))
    # The busiest stage's interference, said before any figure in the summary.
    workload = DemoWorkload(w.name, len(w.dataset), w.decoder, w.batch_size, w.num_workers, run.device)
    jsonio.write_text(out / "summary.md", demo_markdown(workload, h, run_doc, d))
    files = ("health.json", "run.json", "steps.csv", "diagnose.json", "breakdown.png", "experiments.png", "summary.md")
    demo = DemoResult(
        health=h,
        run=run_doc,
        diagnose=d,
        files=files + ("demo.json",),
        elapsed_s=time.perf_counter() - t0,
        workload=workload,
    )
    jsonio.write(out / "demo.json", demo.to_dict())
    return demo
