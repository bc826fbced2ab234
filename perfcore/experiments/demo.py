"""`perfcore demo`: health + run + diagnose on the built-in `demo` workload, into one report folder."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from perfcore.analysis.units import fmt_ms, fmt_share, fmt_x
from perfcore.report import jsonio

__all__ = ["run_demo"]


def _dump(obj: Any, path: Path) -> None:
    jsonio.write(path, obj)


def _public(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def _gains(health: dict, run: dict, diag: dict) -> str:
    """What each stage says removing loading gains, side by side: health's loop is forward-only (a larger
    share of a shorter step), run predicts for a training step, diagnose measures that prediction."""
    def load_gain(v: dict) -> str | None:
        c = next((c for c in v.get("causes") or [] if c["label"] == "load"), None)
        return c["expected_gain"]["text"] if c and c.get("expected_gain", {}).get("text") else None

    h, r = load_gain(health), load_gain(run)
    check = next((c for c in diag.get("checks") or [] if c["experiment"].startswith("synthetic")), None)
    if not r:
        return ""
    out = (f"removing loading: {r} for a training step (run's prediction, which diagnose checked)"
           + (f"; {h} for health's forward-only loop (no backward or optimizer)" if h else ""))
    if check:
        out += f"; {check['sentence']}"
    return out


def run_demo(out: Path, quick: bool = False, progress=None) -> dict[str, Any]:
    from perfcore.experiments.diagnose import diagnose
    from perfcore.experiments.health import health
    from perfcore.report.experiments import render_diagnose, render_health
    from perfcore.experiments.runner import measure_workload
    from perfcore.report.plots import plot_breakdown, plot_experiments
    from perfcore.report.terminal import render_text
    from perfcore.workloads import load_workload

    t0 = time.perf_counter()
    say = progress.stage if progress else (lambda m: None)
    steps_cb = progress.steps if progress else None
    say("preparing the demo workload (JPEGs are made once and cached)")
    w = load_workload("demo")
    say("health: next batch -> forward -> loss")
    h = health(w, steps=30 if quick else 100, warmup=3, progress=steps_cb, target="demo")
    say("run: training steps, attributed")
    row = measure_workload(w, steps=15 if quick else 40, warmup=3, train=True, progress=steps_cb)
    run_doc = dict(row["_result"])
    run_doc["workload"] = "demo"
    table = row["_table"]
    say("diagnose: synthetic data, workers, decoder")
    # Diagnose's baseline is the run just measured: one measurement, so the gain run predicts for
    # removing loading is the one diagnose checks with synthetic data, not a second estimate of it.
    d = diagnose(w, steps=8 if quick else 25, warmup=2, progress=say, baseline=row)

    files = {}
    _dump(_public(h), out / "health.json")
    _dump(run_doc, out / "run.json")
    jsonio.write_csv(out / "steps.csv", table)
    _dump(d, out / "diagnose.json")
    plot_breakdown(table, out / "breakdown.png", title=run_doc["verdict"]["summary"])
    plot_experiments(d["experiments"], out / "experiments.png", title=d["verdict"]["summary"].split(";")[0])
    files.update({n: n for n in ("health.json", "run.json", "steps.csv", "diagnose.json", "breakdown.png",
                                 "experiments.png")})
    bounds = {"health": h["verdict"]["bound"], "run": run_doc["verdict"]["bound"], "diagnose": d["verdict"]["bound"]}
    agree = len(set(bounds.values())) == 1
    # One verdict function behind all three; they can still differ when the evidence differs (health's
    # loop has no backward; diagnose corrects the attribution by measurement): say so, never hide it.
    agreement = (f"all three stages name the same cause: {bounds['run']}" if agree else
                 "the stages differ: " + ", ".join(f"{k} {v}" for k, v in bounds.items())
                 + " (diagnose measured it with synthetic data: that is the firmest)")
    gains = _gains(h["verdict"], run_doc["verdict"], d["verdict"])
    if gains:
        agreement += f"; {gains}"
    text = "\n\n".join([render_health(h), render_text(run_doc), render_diagnose(d), agreement])
    # The busiest stage's interference, said before any figure in the summary.
    found = [v["interference"] for v in (h["verdict"], run_doc["verdict"], d["verdict"]) if v.get("interference")]
    busy = max(found, key=lambda f: f.get("others_cores") or 0) if found else None
    summary = ["# perfcore demo", "",
               f"Workload: {w.name} — {len(w.dataset)} real JPEGs decoded with {w.decoder}, a small CNN, "
               f"batch {w.batch_size}, {w.num_workers} workers, on {row['device']}.", "",
               *([f"**Interference: {busy['sentence']}** ({busy.get('detail', '')})", ""] if busy else []),
               "## Health", "", h["plain_summary"], "",
               "## Where each training step goes", "", "![breakdown](breakdown.png)", "",
               "| label | ms/step | share |", "|---|---|---|"]
    for lb, v in run_doc["breakdown_ms"].items():
        summary.append(f"| {lb} | {fmt_ms(v)} | {fmt_share(run_doc['breakdown_fraction'][lb])} |")
    summary += ["", f"**{run_doc['verdict']['plain_summary']}**", ""]
    summary += [f"- {r['text']} (evidence: {r['evidence']})" for r in run_doc["recommendations"]]
    summary += ["", "## Diagnosis", "", "![experiments](experiments.png)",
                "", "| experiment | step | samples/s | speedup |", "|---|---|---|---|"]
    for e in d["experiments"]:
        summary.append(f"| {e['name']} | {fmt_ms(e['step_ms'])} | {e['samples_per_s']:.0f} | {fmt_x(e['speedup'])} |")
    summary += ["", f"**{d['verdict']['plain_summary']}**", "", f"_{agreement[0].upper()}{agreement[1:]}._", ""]
    jsonio.write_text(out / "summary.md", "\n".join(summary))
    files["summary.md"] = "summary.md"
    doc = {"schema": "perfcore.experiments.demo/1", "health": _public(h), "run": run_doc, "diagnose": d,
           "agree": agree, "bounds": bounds, "files": files,
           "elapsed_s": time.perf_counter() - t0}
    _dump(_public(doc), out / "demo.json")
    doc["files"]["demo.json"] = "demo.json"
    doc["_text"] = text + f"\n\ndemo finished in {doc['elapsed_s']:.0f} s"
    return doc
