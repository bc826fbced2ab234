"""The terminal text of the triage stages: health's, diagnose's (short and with every check), sweep's and
the demo's (short, and --explain: health, the run's report without a second verdict line, diagnose with
every check, and what removing loading gains), from their typed results; and a triage folder's own
report (stage_text), read back from its validated document."""

from __future__ import annotations

import shlex

from pathlib import Path
from typing import Any

from perfcore.analysis.checks import Against, Check, Reason
from perfcore.analysis.command_results import DemoResult, DiagnoseResult, HealthResult, ScriptExit, SweepResult
from perfcore.analysis.status import Agreement, Change
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_x
from perfcore.report.terminal import interference_lines, verdict_line
from perfcore.report.words import (
    LOADING_CAUSE,
    compute_change,
    compute_shortfall,
    fitting,
    level_word,
    readable_frame,
    speedups_words,
    workers_help,
)
from perfcore.report.words.advice import text_of
from perfcore.report.words.findings import note_words, patch_text
from perfcore.report.words.runs import config_failure, knee_text, script_exit_words
from perfcore.report.words.verdict import gains_text, health_sentence, health_summary, heartbeat_meaning, verdict_short

__all__ = [
    "render_health",
    "render_diagnose",
    "render_diagnose_brief",
    "render_demo_brief",
    "render_sweep",
    "render_demo",
    "stage_text",
]


def render_health(doc: HealthResult) -> str:
    lines = [f"health of {doc.workload} on {doc.device}: {doc.steps} iterations of next batch -> forward -> loss"]
    lines += interference_lines(doc.interference or (doc.verdict.interference if doc.verdict else None))
    lines += [
        f"  step {fmt_ms(doc.step_ms)}, {doc.samples_per_s:.0f} samples/s, busy {100 * doc.busy_mean:.0f}% "
        f"(std {100 * doc.busy_std:.0f}%), CPU {doc.cpu_percent:.0f}%"
    ]
    # A health run measured for a later decision (the demo's) has no verdict of its own: its busy line.
    plain = health_summary(doc)
    v = doc.verdict
    if v is None or v.bound == "unknown":
        lines.append(f"  {plain}")
    elif v.uncertain and plain:
        lines.append(f"verdict: {plain} [uncertain: see INTERFERENCE above]")
    else:
        lines.append(f"verdict: {health_sentence(doc)}")
    if doc.heartbeat is not None:
        lines.append(f"heartbeat: {heartbeat_meaning(doc.heartbeat, str(doc.busy_source))}")
    if doc.next:
        lines.append(f"next: {doc.next}")
    lines += _script_exit(doc.script_exit)
    return "\n".join(lines)


def _script_exit(ex: ScriptExit | None) -> list[str]:
    """The one line for a script that failed after measured steps (its code is the command's)."""
    said = script_exit_words(ex) if ex is not None else ""
    return [said] if said else []


def render_diagnose(doc: DiagnoseResult) -> str:
    lines = [f"diagnose {doc.workload} on {doc.device}"] + interference_lines(
        doc.interference or doc.verdict.interference
    )
    lines += [f"  {'experiment':<34} {'step':>9} {'+-':>8} {'samples/s':>10} {'busy %':>7} {'CPU %':>6} {'speedup':>8}"]
    for e in doc.experiments:
        if e.oom:
            lines.append(f"  {e.name:<34} {'OOM':>8}")
            continue
        if e.error:
            lines.append(f"  {e.name:<34} failed: {e.error}")
            continue
        cpu = e.cpu_percent
        sem = e.step_sem_ms
        lines.append(
            f"  {e.name:<34} {fmt_ms(e.step_ms):>9} {fmt_ms(sem) if sem is not None else '':>8} "
            f"{e.samples_per_s:>10.0f} {100 * e.busy_mean:>7.0f} {cpu if cpu is None else round(cpu):>6} "
            f"{fmt_x(e.speedup):>8}"
        )
    for s in doc.skipped:
        lines.append(f"  {s.name:<34} skipped: {note_words(s.reason)}")
    p = doc.worker_profile
    ratio = f", CPU/wall {p.cpu_to_wall:.2f}" if p.cpu_to_wall is not None else ""
    lines.append(f"  __getitem__: {fmt_ms(p.ms_per_item)} per item{ratio}" + ("; top functions:" if p.top else ""))
    if p.note:
        lines.append(f"    ({note_words(p.note)})")
    for r in p.top[:5]:
        lines.append(f"    {fmt_ms(r.self_ms_per_item):>9}/item  {readable_frame(r.function)}")
    lines.append(verdict_line(doc.verdict))
    for c in doc.verdict.checks:
        pb, mb = c.predicted_band, c.measured_band
        if c.against is Against.BOUND:
            # A workers change is judged against what removing all loading can give; it predicts nothing.
            end = _bound_word(c)
            lines.append(
                f"  {c.name}: at most {fmt_x(c.predicted_speedup)} (removing all loading), "
                f"measured {fmt_x(c.measured_speedup)}"
                + (f" ({fmt_band(*mb)})" if mb and mb[1] is not None else "")
                + f": {end}"
            )
        elif pb or mb:
            lines.append(
                f"  {c.name}: predicted {fmt_x(c.predicted_speedup)}"
                + (f" ({fmt_band(*pb)})" if pb and pb[1] is not None else "")
                + f", measured {fmt_x(c.measured_speedup)}"
                + (f" ({fmt_band(*mb)})" if mb and mb[1] is not None else "")
                + f": {c.status.value}"
                + (
                    f" ({'within' if c.status is Agreement.CONFIRMED else 'confirmed needs'} "
                    f"{speedups_words(c.agreement_band)})"
                    if speedups_words(c.agreement_band)
                    else ""
                )
            )
    for r in doc.findings or ():
        lines.append(f"  - {text_of(r, doc.loader_plan)}")
    lines += _script_exit(doc.script_exit)
    return "\n".join(lines)


def _bound_word(c: Check) -> str:
    """A check against a bound (what removing all loading can give): where the measurement fell."""
    if c.status is Agreement.INCONCLUSIVE:
        return "inconclusive"
    if c.above_bound:
        # A measurement outranks the model: past what removing the wait explains, what else changed is said.
        return "above that bound" + (f"; {compute_change(c)}" if compute_change(c) else "")
    m, p = c.measured_speedup, c.predicted_speedup
    if c.change is Change.SLOWER:  # "within it" beside "(slower)" read as if the workers were on the way
        return workers_help(c)
    # Past the bound's point but inside its band: "within it" would read as below it.
    return "past it, within noise" if m is not None and p is not None and m > p else "within it"


def _check_short(c: Check) -> str:
    """One experiment's check in a line: what it measured against what it tests, and its status."""
    mx, px = fmt_x(c.measured_speedup), fmt_x(c.predicted_speedup)
    noise = c.measured_noise_ms
    if c.against is Against.BOUND:
        # The measured band beside the word: "0.80x (within noise)" alone reads as a contradiction.
        band = speedups_words(c.measured_band)
        said = c.change.value if c.change is not None else None
        changes = [""]
        if said and c.status is not Agreement.INCONCLUSIVE:
            changes = ([f" ({band}, {said})"] if band else []) + [f" ({said})", ""]
        names = [c.name, c.name.split(":")[0]]  # the experiment's code alone where its name is too long
        lines = [f"  {n}: measured {mx}{ch}, at most {px} possible: {_bound_word(c)}" for ch in changes for n in names]
        return fitting(lines)  # the band goes first where too long
    status = c.status.value if c.status is not None else "inconclusive"
    grew = compute_shortfall(c)
    moved = compute_change(c)
    why = (
        f"; {moved}"
        if moved and c.reason is Reason.COMPUTE_DRIFT
        else ", compute drifted between the runs"
        if c.reason is Reason.COMPUTE_DRIFT
        else f", noise {fmt_ms(noise)} a step"
        if status == "inconclusive" and noise is not None
        else f", its compute took {fmt_ms(grew)} more a step"
        if grew is not None
        else ""
    )
    # The band the status was judged on (the prediction's interval widened by the runs' noise), beside
    # the word, so "confirmed" is never read against a narrower range printed elsewhere; a shortfall
    # the experiment's own compute explains is said in its place (the line's width holds one).
    agreeing = speedups_words(c.agreement_band) if status != "inconclusive" and grew is None else ""
    said = "within" if c.status is Agreement.CONFIRMED else "confirmed needs"
    tail = [f" ({said} {agreeing})", ""] if agreeing else [""]
    names = [c.name, c.name.split(" (")[0]]
    return fitting([f"  {n}: predicted {px}, measured {mx}: {status}{why}{t}" for t in tail for n in names])


def render_diagnose_brief(doc: DiagnoseResult, more: str | None = None, *, header: bool = True) -> str:
    """Diagnose at a glance (at most 20 lines): the experiments' table, __getitem__'s cost, one verdict
    line, each check in a line, at most two "try" lines and where to read more. render_diagnose is all
    of it (--explain)."""
    from perfcore.report.words.advice import try_short

    lines = [f"diagnose {doc.workload} on {doc.device}{busy_note(doc)}"] if header else []
    lines.append(f"  {'experiment':<34} {'step':>9} {'+-':>8} {'samples/s':>10} {'speedup':>8}")
    for e in doc.experiments:
        if e.oom or e.error:
            lines.append(f"  {e.name:<34} {'OOM' if e.oom else 'failed':>9}")
            continue
        sem = e.step_sem_ms
        lines.append(
            f"  {e.name:<34} {fmt_ms(e.step_ms):>9} {fmt_ms(sem) if sem is not None else '':>8} "
            f"{e.samples_per_s:>10.0f} {fmt_x(e.speedup):>8}"
        )
    v = doc.verdict
    p = doc.worker_profile
    if p.ms_per_item is not None:
        # What diagnose found loading to be, where it is more than "data loading" (CPU decode, I/O).
        said = LOADING_CAUSE.get(v.loading.kind) if v.bound == "load" and v.loading is not None else None
        cause = f": {said}" if said not in (None, "data loading") else ""
        top = readable_frame(p.top[0].function) if p.top else ""
        lines.append(
            f"  __getitem__: {fmt_ms(p.ms_per_item)} per item"
            + (f", {100 * p.cpu_to_wall:.0f}% of it on a CPU" if p.cpu_to_wall is not None else "")
            + cause
            + (f"; top: {top if len(top) <= 40 else top[:37] + '...'}" if top else "")
        )
    lines.append(f"verdict: {verdict_short(v)}")
    lines += [_check_short(c) for c in v.checks]
    lines += [try_short(r, v, None) for r in (doc.findings or ())[:2]]
    lines += _script_exit(doc.script_exit)
    if more:
        lines.append(f"more: {more}")
    return "\n".join(lines)


def render_demo_brief(doc: DemoResult, folder: Any) -> str:
    """The demo at a glance (at most 30 lines): health's busy line, the run's table, diagnose's
    experiments and the one verdict with its checks and advice; `perfcore report FOLDER --explain` (or
    `perfcore demo --explain`) is all of it."""
    from perfcore.report.terminal import brief_table

    h, run, d = doc.health, doc.run, doc.diagnose
    what = "GPU busy" if h.busy_source == "gpu_util" else "compute share of the step"
    lines = [
        f"health: {h.steps} forward-only iterations, step {fmt_ms(h.step_ms)}, {what} "
        f"{100 * float(h.busy_mean or 0):.0f}% (std {100 * float(h.busy_std or 0):.0f}%)",
        "run: " + "\n".join(brief_table(run))[len("perfcore: ") :],
        "diagnose:" + busy_note(d).replace(";", "", 1),
        render_diagnose_brief(
            d, f"{folder}/report.html; all evidence: perfcore report {shlex.quote(str(folder))} --explain", header=False
        ),
    ]
    return "\n".join(lines + [f"demo finished in {doc.elapsed_s:.0f} s"])


def _verdict_cell(c: dict[str, Any]) -> str:
    if not c.get("verdict"):
        return ""
    return (
        "  healthy"
        if c.get("verdict_level") == "healthy"
        else f"  {c['verdict']} ({level_word(c.get('verdict_level'))})"
    )


def _int(v):
    """A table column holding None and ints comes back as floats (2.0): print the int."""
    return int(v) if isinstance(v, float) and v == v else v


def render_sweep(doc: SweepResult, folder: str | None = None) -> str:
    """The sweep's table, its best configuration and the patch to apply (from `folder`, where it was written)."""
    lines = [
        f"sweep of {doc.workload}: {len(doc.configs)} configurations in {doc.elapsed_s:.0f} s",
        f"  {'batch':>5} {'workers':>7} {'pin':>5} {'prefetch':>8} {'step':>9} {'samples/s':>10} {'busy %':>7}"
        f"  verdict",
    ]
    for c in sorted(doc.configs, key=lambda c: -(c["samples_per_s"] or 0)):
        # A configuration that did not measure fine shows its status (OOM, CRASHED, INFEASIBLE), never a rate.
        status = c.get("status") or ("oom" if c["oom"] else "ok")
        failed = status != "ok" or c["step_ms"] is None
        step = status.upper() if failed else fmt_ms(c["step_ms"])
        busy = "" if failed or c["busy_mean"] is None else f"{100 * c['busy_mean']:.0f}"
        rate = "-" if failed or c["samples_per_s"] is None else f"{c['samples_per_s']:.0f}"
        lines.append(
            f"  {c['batch_size']:>5} {c['num_workers']:>7} {str(c['pin_memory']):>5} "
            f"{str(_int(c['prefetch_factor']) if c['num_workers'] else '-'):>8} {step:>9} {rate:>10} "
            f"{busy:>7}"
            + (f"  {config_failure(c)[:80]}" if failed and config_failure(c) else _verdict_cell(c))
            + (f"  replaced: {c['replaced']}" if c.get("replaced") else "")
        )
    b = doc.best
    if b is None:
        lines.append("best: none (no configuration measured fine)")
    else:
        # prefetch_factor means nothing without workers: not printed for a 0-worker configuration.
        lines.append(
            f"best: batch_size={b['batch_size']} num_workers={b['num_workers']} pin_memory={b['pin_memory']}"
            + (f" prefetch_factor={_int(b['prefetch_factor'])}" if b["num_workers"] else "")
            + f" -> {b['samples_per_s']:.0f} samples/s"
            + (f" (replaced: {b['replaced']})" if b.get("replaced") else "")
        )
    # The DataLoader change at the script's call, as a patch
    lines += patch_text(doc.patch, folder) if folder else patch_text(doc.patch)
    if doc.kept:
        lines.append("kept as the script sets them: " + " ".join(f"{k}={v}" for k, v in doc.kept.items()))
    for k in doc.knees:
        lines.append(f"  {knee_text(k)}")
    return "\n".join(lines)


def busy_note(doc: DiagnoseResult) -> str:
    """ "; BUSY: ..." where other processes materially used the machine during any of diagnose's runs
    (each experiment's own measured finding; the busiest said, with the experiments it touched)."""
    found = [
        (e.experiment.value, e.interference)  # each run by its code: baseline, A, B, C
        for e in doc.experiments
        if e.interference is not None and e.interference.others_cores is not None
    ]
    busy = [(n, f) for n, f in found if f.material]
    if not busy:
        return ""
    worst = max(f.others_cores for _, f in busy)
    cores = next((f.cores for _, f in busy if f.cores), None)
    of = f" of {cores}" if cores else ""
    which = "all runs" if len(busy) == len(found) and len(found) > 1 else ", ".join(n for n, _ in busy)
    return f"; BUSY: others used up to {worst:.1f}{of} cores ({which}); the speedups are uncertain"


def render_demo(doc: DemoResult) -> str:
    """The whole demo (--explain): health, the run's report without a second verdict line, diagnose with
    every check, and what removing loading gains, predicted beside measured."""
    from perfcore.report.terminal import render_text

    run, d = doc.run, doc.diagnose
    agreement = gains_text(run.verdict, d.verdict)
    parts = [render_health(doc.health), render_text(run, verdict=False), render_diagnose(d)]
    return "\n\n".join(parts + ([agreement] if agreement else []) + [f"demo finished in {doc.elapsed_s:.0f} s"])


def stage_text(folder: Path, explain: bool = False) -> tuple[Any, str, str] | None:
    """(the command's result, terminal text, stage name) of a demo, health, diagnose or sweep folder, read from
    its validated document (a demo folder's demo.json before its stages' documents); None when the folder holds
    none of them."""
    from perfcore.analysis.reader import stage_document

    renders = {
        "demo.json": render_demo if explain else (lambda d: render_demo_brief(d, folder)),
        "health.json": render_health,
        "diagnose.json": render_diagnose if explain else render_diagnose_brief,
        "sweep.json": render_sweep,
    }
    found = stage_document(folder, tuple(renders))
    if found is None:
        return None
    name, doc = found
    return doc, renders[name](doc), name.split(".")[0]
