"""`perfcore demo`: health + run + diagnose on the built-in `demo` workload, into one report folder."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from perfcore.report import jsonio
from perfcore.report.demo_words import demo_markdown, gains_text

__all__ = ["run_demo"]


def _dump(obj: Any, path: Path) -> None:
    jsonio.write(path, obj)


def _public(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def run_demo(out: Path, quick: bool = False, progress=None) -> dict[str, Any]:
    from perfcore.experiments.diagnose import diagnose
    from perfcore.experiments.health import health
    from perfcore.report.experiments import render_diagnose, render_health
    from perfcore.experiments.measurement import Trial
    from perfcore.experiments.runner import WorkloadRunner
    from perfcore.report.plots import plot_breakdown, plot_experiments
    from perfcore.report.terminal import render_text
    from perfcore.report.verdict_words import headline
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
    table = run.table
    say("diagnose: synthetic data, workers, decoder")
    # Diagnose's baseline is the run just measured: one measurement, so the gain run predicts for
    # removing loading is the one diagnose checks with synthetic data, not a second estimate of it.
    d = diagnose(runner, steps=8 if quick else 25, warmup=2, progress=say, baseline=run)
    run_doc = {
        **run.document,
        "workload": "demo",
        "verdict": d["verdict"],
        "recommendations": d.get("recommendations") or [],
    }
    if d.get("loader_plan"):
        run_doc["loader_plan"] = d["loader_plan"]

    files = {}
    _dump(_public(h), out / "health.json")
    _dump(run_doc, out / "run.json")
    jsonio.write_csv(out / "steps.csv", table)
    _dump(d, out / "diagnose.json")
    plot_breakdown(table, out / "breakdown.png", title=headline(run_doc["verdict"]))
    plot_experiments(d["experiments"], out / "experiments.png", title=headline(d["verdict"]))
    files.update(
        {n: n for n in ("health.json", "run.json", "steps.csv", "diagnose.json", "breakdown.png", "experiments.png")}
    )
    # One decision: the run's verdict is diagnose's (the run checked by experiment A); health measured
    # a forward-only loop and decides nothing of its own.
    bounds = {"run": run_doc["verdict"]["bound"], "diagnose": d["verdict"]["bound"]}
    agree = True
    agreement = gains_text(run_doc["verdict"], d["verdict"])
    text = "\n\n".join(
        [render_health(h), render_text(run_doc, verdict=False), render_diagnose(d)] + ([agreement] if agreement else [])
    )
    # The busiest stage's interference, said before any figure in the summary.
    found = [f for f in (h.get("interference"), run.interference, d.get("interference")) if f and f.get("material")]
    busy = max(found, key=lambda f: f.get("others_cores") or 0) if found else None
    workload = {
        "name": w.name,
        "images": len(w.dataset),
        "decoder": w.decoder,
        "batch_size": w.batch_size,
        "num_workers": w.num_workers,
        "device": run.device,
    }
    summary = demo_markdown(workload, h, run_doc, d, busy, agreement)
    jsonio.write_text(out / "summary.md", summary)
    files["summary.md"] = "summary.md"
    doc = {
        "schema": "perfcore.experiments.demo/1",
        "health": _public(h),
        "run": run_doc,
        "diagnose": d,
        "agree": agree,
        "bounds": bounds,
        "files": files,
        "elapsed_s": time.perf_counter() - t0,
    }
    _dump(_public(doc), out / "demo.json")
    doc["files"]["demo.json"] = "demo.json"
    doc["_text"] = text + f"\n\ndemo finished in {doc['elapsed_s']:.0f} s"
    return doc
