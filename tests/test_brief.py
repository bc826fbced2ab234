"""The terminal report read at a glance: line budgets, each fact once, no line over 120 characters but a
path, the same decision as the document. Built on documents real perfcore commands wrote."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from run_docs import decided, redecided

from perfcore.analysis.migrate import migrate
from perfcore.report.stage_text import render_demo_brief, render_diagnose_brief
from perfcore.report.terminal import render_brief, render_text

DOCS = Path(__file__).with_name("report_docs")


def doc_of(name: str) -> dict:
    return json.loads((DOCS / name).read_text())


def run_of(name: str):
    """An older document's run, decided again on its figures as perfcore run decides."""
    return redecided(doc_of(name))


def _fits(text: str, most: int) -> list[str]:
    lines = text.splitlines()
    assert len(lines) <= most, text
    for line in lines:  # a long line is one that names a path (a run folder, the user's file)
        assert len(line) <= 120 or "/" in line, line
    return lines


def test_run_brief_is_a_header_the_table_one_verdict_and_two_tries():
    doc = run_of("run.json")
    lines = _fits(render_brief(doc, "runs/r1"), 15)
    assert lines[0].startswith(f"perfcore: {doc.steps} steps") and "mean step" in lines[0] and "p90" in lines[0]
    assert "backend" not in lines[0] and len(lines[0]) <= 100  # one step statistic, said as which, in plain words
    assert [ln.split()[0] for ln in lines[2:7]] == ["load", "transfer", "compute", "comm", "host"]
    assert sum(ln.startswith("verdict:") for ln in lines) == 1 and "input-bound (major)" in lines[7]
    tries = [ln for ln in lines if ln.startswith("try:")]
    assert 1 <= len(tries) <= 2 and tries[0].startswith("try: train_small.py:30: set num_workers=1")
    assert lines[-1] == "more: runs/r1/report.html; all evidence: perfcore report runs/r1 --explain"
    # --explain keeps every piece of evidence the short report leaves out.
    full = render_text(doc)
    assert len(full.splitlines()) > len(lines) and "evidence:" in full and "steps counted at" in full


def test_diagnose_and_demo_briefs_fit_their_budgets():
    from perfcore.analysis.command_results import DemoResult, DiagnoseResult

    d = DiagnoseResult.from_dict(migrate(doc_of("diagnose.json")))
    lines = _fits(render_diagnose_brief(d, "runs/d/report.html; all evidence: --explain"), 20)
    assert sum(ln.startswith("verdict:") for ln in lines) == 1
    # A check from before statuses were kept: its status read from `agrees`, as its own sentence said it.
    (said,) = [ln.split(": ")[-1].split(",")[0] for ln in lines if ln.startswith("  synthetic")]
    assert f"predicted: {said}" in doc_of("diagnose.json")["verdict"]["checks"][0]["sentence"]
    demo = dict(doc_of("demo.json"), health=doc_of("health.json"), run=doc_of("demo_run.json"), diagnose=doc_of("diagnose.json"))
    lines = _fits(render_demo_brief(DemoResult.from_dict(migrate(demo)), "runs/demo"), 30)
    assert sum(ln.startswith("verdict:") for ln in lines) == 1
    assert lines[0].startswith("health:") and lines[1].startswith("run:") and lines[-1].startswith("demo finished")


def _table(compute, host, load=None):
    """A step table from per-step ms (transfer and comm zero), as the attribution writes it."""
    import numpy as np
    from test_uncertainty import table

    return table(np.zeros(len(compute)) if load is None else load, compute, host)


def _summarized(df, **more):
    from perfcore.analysis.attribution import summarize

    return decided({**summarize(df, on_gpu=False, backend="host", device="cpu"), **more}, zero_code=True)


def _rows(lines):
    return {ln.split()[0]: ln.split()[1:4] for ln in lines[2:7]}  # label: [ms, unit, share]


def test_the_table_and_the_verdict_quote_one_step_statistic():
    import numpy as np

    from perfcore.analysis.units import fmt_ms, fmt_share

    # The regression example: 120 us compute and 166 us host a step; 8 of 80 steps preempted inside
    # compute for ~5 ms, so the plain mean reads compute-heavy while the steady step is host-bound.
    n = 80
    compute = np.full(n, 0.120)
    compute[::10] = 5.0
    doc = _summarized(_table(compute, np.full(n, 0.166)))
    v = doc.verdict
    assert v.bound == "host" and doc.breakdown_fraction.compute > 0.5  # the mean says otherwise
    lines = render_brief(doc, "runs/r1").splitlines()
    (said,) = [ln for ln in lines if ln.startswith("verdict:")]
    host = v.named[0]
    assert f"{fmt_ms(host.ms_per_step)} of a {fmt_ms(v.step_ms)} step ({fmt_share(host.share)}" in said
    rows = _rows(lines)
    assert " ".join(rows["host"][:2]) == fmt_ms(host.ms_per_step) and rows["host"][2] == fmt_share(host.share)
    assert f"mean step {fmt_ms(v.step_ms)} less outliers" in lines[0]
    # Setting 8 of 80 steps apart moves the mean from 0.77 to 0.29 ms: said, with the script's own mean.
    mean = fmt_ms(doc.step_time_ms.mean)
    held = [ln for ln in lines if ln.startswith("  the 8 slow step(s) set apart (10% of them) hold ")]
    assert len(held) == 1 and held[0].endswith(f"of the time: with them the mean step is {mean}"), lines
    # The plain mean stays in --explain.
    assert f"mean {fmt_ms(doc.step_time_ms.mean)}" in render_text(doc)

    # The minGPT adder: healthy, and its largest avoidable share is the table's own row.
    load = np.full(n, 11.0)
    compute = np.full(n, 334.0)
    compute[::10] = 3000.0
    doc = _summarized(_table(compute, np.full(n, 4.7), load))
    lines = render_brief(doc, "runs/r1").splitlines()
    (said,) = [ln for ln in lines if ln.startswith("verdict:")]
    assert doc.verdict.healthy and f"(largest: load, {_rows(lines)['load'][2]})" in said
    assert fmt_share(doc.breakdown_fraction.load) != _rows(lines)["load"][2]  # the mean would disagree


def _straggler_doc():
    from test_ranks import _merged, _part

    doc, focus = _merged([_part(0, 1.0, 9.0), _part(1, 1.0, 9.0), _part(2, 1.0, 0.0, compute=10.0)])
    doc["backend"] = "host"
    return decided(doc, zero_code=True, focus=focus, evidence={"cpu_count": 8})


def _busy(df, **more):
    """A run on a busy machine whose torch threads outnumber the free cores, decided."""
    from perfcore.analysis.attribution import summarize

    busy = {"material": True, "reasons": ["others"], "others_cores": 1.4, "cores": 2}
    doc = {**summarize(df, on_gpu=False, backend="host", device="cpu"), "interference": busy,
           "threads": {"torch": 2, "omp_env": None, "cpus": 2}, **more}
    return decided(doc, zero_code=True, evidence={"cpu_count": 2})


def test_every_line_of_the_short_report_fits_and_speaks_plainly():
    import numpy as np

    n = 80
    compute = np.full(n, 0.120)
    compute[::10] = 5.0
    fn = {
        "file": "main.py",
        "function": "sgd_update",
        "line": 60,
        "ms_per_step": 0.1,
        "share": 0.6,
        "samples": 40,
        "user": True,
    }
    calls = [{"file": "main.py", "function": "sgd_update", "line": 60, "method": "item", "per_step": 3.0, "total": 240}]
    lines = {
        "steps": 80,
        "samples": 60,
        "interval_ms": 10.0,
        "labels": [
            {
                "label": "host",
                "ms_per_step": 0.166,
                "samples": 60,
                "functions": [fn],
                "lines": [{**fn, "calls": calls}],
            }
        ],
    }
    host_bound = _busy(_table(compute, np.full(n, 0.166)), lines=lines)
    load = np.full(n, 11.0)
    compute = np.full(n, 334.0)
    compute[::10] = 3000.0
    healthy = _busy(_table(compute, np.full(n, 4.7), load))
    starvation = {
        "steps": 445,
        "starved": 435,
        "share": 435 / 445,
        "threshold_ms": 0.97,
        "p50_wait_ms": 3.58,
        "p95_wait_ms": 23.6,
        "longest_run": 170,
        "longest_run_first_step": 5,
        "load_ms_per_step": 6.48,
    }
    starved = _busy(_table(np.full(n, 18.6), np.full(n, 0.44), np.full(n, 6.48)), starvation=starvation)
    docs = [run_of("run.json"), _straggler_doc(), host_bound, healthy, starved]
    for doc in docs:
        text = render_brief(doc, "runs/r1")
        _fits(text, 15)
        assert "host gaps" not in text and "(warn)" not in text, text
    said = {d.verdict.bound: render_brief(d, "runs/r1") for d in docs}
    assert "verdict: straggler rank 2 (major)" in said["straggler"]
    assert "time outside the model" in said["host"] and "[uncertain: busy]" in said["host"]
    assert "steps that waited on the loader: 435 of 445 (98%) over 970 µs; their p50 wait 3.58 ms" in said["load"]
    assert "starved" not in said["load"]
    assert "[uncertain: busy]" in render_brief(healthy, "runs/r1")
    # The newcomer's CNN: a loader in the training process, loading 9% of each step, under a compute-bound
    # verdict. Before: "compute-bound (healthy)" above "loader starved: 176 of 195 steps (90%)".
    from perfcore.analysis.run_context import Loader

    in_process = dataclasses.replace(
        _busy(_table(np.full(n, 91.0), np.full(n, 0.3), np.full(n, 9.0)), starvation=starvation),
        loaders=(Loader(site="train.py:20", num_workers=0, batches=n),),
    )
    text = render_brief(in_process, "runs/r1")
    assert text.count("verdict: compute-bound") == 1 and "starved" not in text, text
    assert "loading runs in the training process (num_workers=0): 9.00 ms a step (9.0%)" in text, text


def test_a_verdict_line_too_long_gives_up_its_least_needed_parts_first():
    from perfcore.report.words.advice import WIDTH, _fit

    assert (
        _fit(("a" * 80, 0), (" band", 3), (")", 0), (" [busy]", 1), (" [threads]", 4)) == "a" * 80 + " band) [busy]"
    )
    assert _fit(("a" * 90, 0), (" band", 3), (")", 0), (" [busy]", 1)) == "a" * 90 + ") [busy]"
    assert _fit(("a" * (WIDTH + 5), 0), (" x", 1)) == "a" * (WIDTH + 5)  # what must be said is said


def test_a_train_loader_drawn_for_evaluation_says_those_batches_apart():
    from perfcore.analysis.run_context import Loader

    train = Loader(role="train", site="train.py:30", batches=13, eval_batches=5)
    doc = dataclasses.replace(run_of("run.json"), loaders=(train, Loader(role="eval", site="train.py:31", batches=10)))
    line = next(ln for ln in render_text(doc).splitlines() if ln.startswith("  DataLoaders: "))
    assert "train at train.py:30: 13 batches (+5 in evaluation)" in line and "eval at train.py:31: 10 batches" in line
    doc = dataclasses.replace(doc, loaders=(dataclasses.replace(train, eval_batches=None), doc.loaders[1]))
    line = next(ln for ln in render_text(doc).splitlines() if ln.startswith("  DataLoaders: "))
    assert "in evaluation" not in line


def test_a_loop_waiting_on_its_loader_is_said_once_by_the_loader_recommendation(monkeypatch):
    """The loop's line names the DataLoader; the loader recommendation names the same line with its gain:
    only the recommendation is said. Without one, the loop's line stays."""
    import perfcore.report.terminal as terminal

    doc = run_of("run.json")
    line = "  try: DataLoader at train_small.py:30 (num_workers=0): 9.00 ms a step (100% of load) waiting; add workers"
    monkeypatch.setattr(terminal, "lines_text", lambda d, cwd=None: [line])
    tries = [ln for ln in render_brief(doc, "runs/r1").splitlines() if ln.startswith("try:")]
    assert tries and not any(t.startswith("try: DataLoader at") for t in tries)
    assert tries[0].startswith("try: train_small.py:30: set num_workers=1")
    doc = dataclasses.replace(doc, findings=tuple(r for r in doc.findings if r.kind not in ("more_workers", "cheaper_batches")))
    tries = [ln for ln in render_brief(doc, "runs/r1").splitlines() if ln.startswith("try:")]
    assert tries[0] == line.strip()


def test_one_starved_step_is_said_as_one_wait():
    from perfcore.analysis.starvation import Starvation
    from perfcore.report.words.advice import starved_short

    one = Starvation(steps=15, starved=1, share=1 / 15, threshold_ms=8.71, p50_wait_ms=30.1, p95_wait_ms=30.1,
                     longest_run=1, longest_run_first_step=3, load_ms_per_step=2.0)
    assert starved_short(one) == "steps that waited on the loader: 1 of 15 (6.7%) over 8.71 ms; it waited 30.1 ms"
    two = dataclasses.replace(one, starved=2, p95_wait_ms=40.0)
    assert starved_short(two).endswith("; their p50 wait 30.1 ms, p95 40.0 ms")
    # A loader in the training process makes every step wait by construction: its cost a step, not "starved".
    said = starved_short(two, 8.6, 95.0)
    assert said == "loading runs in the training process (num_workers=0): 8.60 ms a step (9.1%)", said


def test_the_header_says_a_busy_machine_beside_outliers_set_apart():
    """"mean step 172 ms less outliers" pushed the BUSY part out of the header while the verdict below still
    said "[uncertain: busy]": the header keeps a short BUSY part whatever else gives way."""
    from run_docs import typed_run

    from perfcore.report.terminal import brief_table

    bd = {"load": 0.0, "transfer": 0.0, "compute": 30.0, "comm": 0.0, "host": 142.0}
    robust = {"step_ms": 172.0, "ms": bd, "steps": 40, "kept_steps": 37, "step_sem_ms": 2.0,
              "outliers": {"count": 3, "steps": [4, 9, 30]}}
    busy = {"material": True, "reasons": ["others"], "cores": 2, "others_cores": 1.6}
    for steps in (36, 40, 4000):  # longer step counts leave less room
        r = typed_run(287.0, bd, breakdown_robust={**robust, "steps": steps}, interference=busy, steps=steps,
                      warmup_steps=5)
        head = brief_table(r)[0]
        assert "less outliers" in head and "BUSY" in head and "1.6" in head and len(head) <= 100, head
