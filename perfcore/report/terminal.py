"""The terminal report of a perfcore.run/1 document: per-label mean, share and a bar; verdict; advice."""

from __future__ import annotations

from typing import Any

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.interference import valid_finding
from perfcore.analysis.uncertainty import valid_robust
from perfcore.analysis.verdict import run_evidence, steady_ms
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_share
from perfcore.report.advice_words import evidence_of, test_of, text_of
from perfcore.report.plan_words import plan_sentence
from perfcore.report.finding_words import evaluation_sentence, memory_sentence, step_source_words
from perfcore.report.label_words import interference_detail, interference_sentence
from perfcore.report.lines_text import lines_text
from perfcore.report.process_words import trainer_lines, trainers_phrase
from perfcore.report.record_words import notes_of
from perfcore.report.robust_words import outliers_sentence
from perfcore.report.verdict_words import cause_words, level_word, plain_words, summary_words

__all__ = ["render_text", "render_brief", "brief_table", "verdict_line", "crashed_early", "FEW_STEPS"]

BAR_WIDTH = 30
# A script that fails within this many measured steps has shown its first steps, not its steady state:
# its figures are reported as partial and not advised on (the advice would be for a loop that does not
# run yet). The verdict's intervals need about this many steps to settle a 10% tier on a quiet machine.
FEW_STEPS = 50
# How the script ended when it did not finish: these are errors (an interrupt or --steps is the user's).
_ERRORS = ("crashed", "exited", "killed", "out of memory")


def _bar(fraction: float) -> str:
    full = int(round(fraction * BAR_WIDTH))
    return "#" * full + "." * (BAR_WIDTH - full)


def render_brief(doc: dict[str, Any], folder: Any = None) -> str:
    """The report read at a glance (at most 15 lines, each fact once): a header line (steps, device,
    backend, p50/p90 step), the five-label table, one verdict line, at most two "try" lines, how the
    script ended when it failed, and where to read more. render_text is the whole of it (--explain)."""
    from perfcore.analysis.advice import training_loader
    from perfcore.report.words import starved_short, try_short, verdict_short

    if not doc.get("steps"):  # no step, or warm-up only: the full text is a line or two already
        return render_text(doc)
    crash = crashed_early(doc)
    lines = crash + brief_table(doc)
    lines.append(verdict_short(doc["verdict"]))
    site = (training_loader(doc.get("loaders")) or {}).get("site")
    # The user's own line that held the verdict's time (and the optimizer's change) come first; the
    # generic host advice ("a sampling profiler shows which lines") is what a named line replaces.
    extra = [s.strip() for s in lines_text(doc)]
    recs = doc.get("recommendations") or []
    # A loop's wait on its DataLoader names the loader's line; a loader recommendation names the same line
    # with the change's measured or expected gain, so it is said instead.
    loader_rec = any(r.get("id") in ("more_workers", "cheaper_batches") for r in recs)
    named = [s for s in extra if s.startswith("try:") and not (loader_rec and s.startswith("try: DataLoader at"))]
    recs = [r for r in recs if not (named and r.get("id") == "host_gaps")]
    tries = list(named)
    for r in recs:
        tries.append(try_short(r, doc["verdict"], site, tuple(tries)))
    lines += [] if crash else [t for t in tries if t][:2]
    starved = starved_short(doc.get("starvation") or {})
    lines += [starved] if starved else []
    ex = doc.get("exit") or {}
    if crash:
        pass  # the first lines said how it ended
    elif ex.get("reason") and ex["reason"] not in ("finished", "steps reached"):
        lines.append(f"partial results: the script {ex.get('sentence') or ex['reason']}")
    else:
        lines += _outcome(doc)
    if doc.get("missing_note"):
        lines.append(f"MISSING: {doc['missing_note']}")
    o = doc.get("overhead") or {}
    if o.get("material"):  # decided with the overhead: more than a rerun of the script moves its step by
        from perfcore.report.words import overhead_short

        lines.append(overhead_short(o))
    lines.append(
        f"more: {folder}/report.html; all evidence: perfcore report {folder} --explain"
        if folder
        else "more: report.html; all evidence: --explain"
    )
    return "\n".join(lines)


def crashed_early(doc: dict[str, Any]) -> list[str]:
    """The lines a report leads with when the script failed within FEW_STEPS measured steps: the error in
    one line, and that the figures are partial and not advised on. Empty for a run that finished, was
    stopped, or failed later."""
    ex = doc.get("exit") or {}
    steps = int(doc.get("steps") or 0)
    if ex.get("reason") not in _ERRORS or steps >= FEW_STEPS:
        return []
    # The exit record's sentence quotes the exception's first line (cut at 200 characters where it is
    # written; the traceback is a file in the folder) and the exit code.
    code = (doc.get("outcome") or {}).get("code")
    said = ex.get("sentence") or (
        str(ex["reason"])
        + (f" ({' '.join(str(ex['exception']).split())})" if ex.get("exception") else "")
        + (f" (exit {code})" if code is not None else "")
    )
    return [
        f"partial results: the script {said}",
        f"{steps} measured step(s) before it ended are too few to advise on; the figures below are what ran",
    ]


def brief_table(doc: dict[str, Any]) -> list[str]:
    """The header line (steps, device, backend, p50/p90 step, a measured busy machine) and the
    five-label table of a run document with measured steps."""
    st = doc["step_time_ms"]
    intf = valid_finding(doc.get("interference")) or {}
    lines = [
        f"perfcore: {doc['steps']} steps (+{doc['warmup_steps']} warm-up){trainers_phrase(doc)} on {doc['device']}, "
        f"{doc['backend']} backend; step p50 {fmt_ms(st['p50'])}, p90 {fmt_ms(st['p90'])}"
        + (
            f"; BUSY: others used {intf['others_cores']:.1f} of {intf['cores']} cores"
            if intf.get("material") and intf.get("others_cores") is not None
            else ""
        )
    ]
    # The figures the verdict judges on (the trimmed steady step where outliers were set apart), so that
    # the table and the verdict line quote one statistic; the plain means stay in --explain and run.json.
    ev = run_evidence(doc)
    step = float(ev["step_ms"] or 0.0)
    ms = steady_ms(ev)
    out = (ev.get("outliers") or {}).get("count")
    lines.append(
        f"  {'label':<9} {'per step':>9} {'share':>6}"
        + (f"  of a {fmt_ms(step)} step: the mean without {out} outlier step(s) of {doc['steps']}" if out else "")
    )
    for lb in LABELS:
        f = ms[lb] / step if step > 0 else 0.0
        lines.append(f"  {lb:<9} {fmt_ms(ms[lb]):>9} {fmt_share(f):>6} {_bar(f)}")
    return lines


def render_text(doc: dict[str, Any], *, verdict: bool = True) -> str:  # noqa: C901, PLR0912, PLR0915
    """verdict=False: the measurement only, where the verdict and its advice are said once elsewhere (the
    demo says them after diagnose has checked them)."""
    if not doc.get("steps") and not doc.get("warmup_steps"):
        return "\n".join([f"perfcore: {doc.get('no_step', 'no step seen')}"] + _outcome(doc))
    st = doc["step_time_ms"]
    if not doc["steps"]:
        # Ended during warm-up: say exactly that, and show the warm-up steps' split as it is.
        lines = [
            f"perfcore: the run ended during warm-up: {doc['warmup_steps']} warm-up step(s), none measured "
            f"(warm-up mean {fmt_ms(doc.get('warmup_step_time_ms') or 0)})",
            "  run longer, or count every step with --warmup 0",
        ]
        return "\n".join(lines + _startup(doc) + _outcome(doc))
    lines = [
        f"perfcore: {doc['steps']} steps measured ({doc['warmup_steps']} warm-up apart){trainers_phrase(doc)}, "
        f"backend {doc['backend']}, "
        f"device {doc['device']}"
    ]
    intf = valid_finding(doc.get("interference")) or valid_finding((doc.get("verdict") or {}).get("interference")) or {}
    if intf.get("material"):  # before any number it inflates
        lines.append(f"INTERFERENCE: {interference_sentence(intf)} ({interference_detail(intf)})")
    rb = valid_robust(doc.get("breakdown_robust")) or {}
    if rb.get("steps") != doc.get("steps"):
        rb = {}  # computed over other rows than the figures shown (the verdict ignores it too)
    lines += [
        f"step time  mean {fmt_ms(st['mean'])}   p50 {fmt_ms(st['p50'])}   p90 {fmt_ms(st['p90'])}"
        + (f"   (warm-up mean {fmt_ms(doc['warmup_step_time_ms'])})" if doc.get("warmup_step_time_ms") else ""),
    ]
    if rb.get("step_ms"):
        band = rb.get("step_ms_band")
        lines.append(
            f"  trimmed mean {fmt_ms(rb['step_ms'])}"
            + (f" ({100 * rb['level']:.0f}% interval {fmt_band(band[0], band[1], fmt_ms)})" if band else "")
            + f" over {rb['kept_steps']} of {rb['steps']} steps; the verdict is judged on it"
        )
    ev = doc.get("evaluation") if isinstance(doc.get("evaluation"), dict) else {}
    if evaluation_sentence(ev):
        lines.append(f"  evaluation: {evaluation_sentence(ev)}")
    lines += [
        "",
        f"  {'label':<9} {'per step':>9} {'share':>6}"
        + (f" {'':<{BAR_WIDTH}} trimmed share ({100 * rb['level']:.0f}% interval)" if rb.get("share_band") else ""),
    ]
    for lb in LABELS:
        f = doc["breakdown_fraction"][lb]
        b = (rb.get("share_band") or {}).get(lb)
        lines.append(
            f"  {lb:<9} {fmt_ms(doc['breakdown_ms'][lb]):>9} {fmt_share(f):>6} {_bar(f)}"
            + (f" {fmt_share(rb['share'][lb])} ({fmt_band(b[0], b[1], fmt_share)})" if b else "")
        )
    if outliers_sentence(rb.get("outliers")):
        lines.append(f"  {outliers_sentence(rb['outliers'])}")
    if verdict:
        lines += ["", verdict_line(doc["verdict"])]
        v = doc["verdict"]
        for c in v.get("causes", [])[1:]:
            lines.append(f"  also {c['bound']} ({level_word(c['level'])}): {cause_words(v, c)[1]}")
    if doc.get("step_source"):
        lines.append(f"  steps counted at: {step_source_words(doc)}")
    plan = doc.get("loader_plan") if isinstance(doc.get("loader_plan"), dict) else None
    for r in doc["recommendations"] if verdict else []:
        lines.append(f"  - {text_of(r, plan)}")
        lines.append(f"    evidence: {evidence_of(r, plan)}" + (f"; try: {test_of(r)}" if test_of(r) else ""))
    lines += lines_text(doc)  # the user's line that held the verdict's time; loader starvation
    if doc.get("kernels"):
        lines += ["", f"  {'top kernels':<60} {'count':>7} {'total ms':>10} {'mean us':>9}"]
        for k in doc["kernels"]:
            name = k["name"] if len(k["name"]) <= 60 else k["name"][:57] + "..."
            lines.append(f"  {name:<60} {k['count']:>7} {k['total_ms']:>10.2f} {k['mean_us']:>9.1f}")
    m = doc.get("memcpy") or {}
    if m.get("by_direction"):
        lines.append("")
        for d, v in m["by_direction"].items():
            lines.append(
                f"  memcpy {d}: {v['bytes'] / 2**20:.1f} MiB in {fmt_ms(v['ms'])}, "
                f"{v['pageable_bytes'] / 2**20:.1f} MiB pageable"
            )
    lines += trainer_lines(doc)
    if len(doc.get("ranks", [])) > 1 or doc.get("missing_ranks"):
        lines += ["", f"  {'rank':<6} {'step ms':>8} " + " ".join(f"{lb:>9}" for lb in LABELS)]
        for r in doc["ranks"]:
            lines.append(
                f"  {r['rank']!s:<6} {r['step_time_ms']['mean']:>8.2f} "
                + " ".join(f"{r['breakdown_ms'][lb]:>9.2f}" for lb in LABELS)
            )
        for st in doc.get("stragglers", []):
            lines.append(f"  straggler: {st['sentence']}")
        for w in doc.get("waiting", []):
            lines.append(f"  {w['sentence']}")
        if doc.get("missing_note"):
            lines.append(f"  MISSING: {doc['missing_note']}")
    split = doc.get("compute_split_ms") or {}
    if split:
        lines += ["", "  host time in " + ", ".join(f"{k} {fmt_ms(v)}" for k, v in split.items()) + " per step"]
    gsplit = doc.get("compute_split_gpu_ms") or {}
    if gsplit:
        lines.append(
            "  kernel time launched in " + ", ".join(f"{k} {fmt_ms(v)}" for k, v in gsplit.items()) + " per step"
        )
    cats = doc.get("kernel_categories") or {}
    if cats:
        lines.append("  kernel time by category: " + ", ".join(f"{c} {100 * v['share']:.0f}%" for c, v in cats.items()))
    w = doc.get("workers") or {}
    roles = [ld for ld in doc.get("loaders") or [] if isinstance(ld, dict) and ld.get("role")]
    if w:
        which = " (the train loader)" if len(roles) > 1 else ""
        lines += [
            "",
            f"  DataLoader{which}: {w['num_workers']} worker(s); a batch takes {fmt_ms(w['fetch_ms_mean'])} to make "
            f"(__getitem__ {fmt_ms(w['getitem_ms_mean'])}, collate {fmt_ms(w['collate_ms_mean'])})",
        ]
    if len(roles) > 1:
        # Each loader apart: an eval loader's batches never set the train loader's figures.
        lines.append(
            "  DataLoaders: "
            + "; ".join(
                f"{ld['role']} at {ld.get('site', '?')}: {ld.get('batches', 0)} batches"
                # A train loader also drawn for an evaluation pass: those batches apart, not in its count.
                + (f" (+{ld['eval_batches']} in evaluation)" if ld.get("eval_batches") else "")
                + (f", {fmt_ms(ld['worker_batch_ms'])} each to make" if ld.get("worker_batch_ms") is not None else "")
                for ld in roles
            )
        )
    plan = doc.get("loader_plan") or {}
    if plan_sentence(plan):
        lines.append(f"  loading ({plan['reason']}): {plan_sentence(plan)}")
    mem = doc.get("memory") or {}
    if mem.get("peak_bytes"):
        kind = "device memory (allocated)" if mem.get("kind") == "cuda_allocated" else "process RSS (peak)"
        lines.append(f"  peak {kind}: {mem['peak_bytes'] / 2**20:.0f} MiB")
        found = mem.get("findings")
        if found:
            said = [memory_sentence(f) for f in found if isinstance(f, dict)]
            lines += [f"  {s.upper()[:1]}{s[1:]}" for s in said]
        elif mem.get("probable_leak"):  # a document from before the findings
            lines.append(f"  PROBABLE LEAK: grows {mem['growth_bytes_per_step'] / 2**20:.2f} MiB per step")
    if doc.get("cpu_util_percent") is not None:
        lines.append(f"  host CPU utilisation during the run: {doc['cpu_util_percent']:.0f}%")
    if intf and not intf.get("material"):
        lines.append(f"  {interference_sentence(intf)}")
    lines += _startup(doc)
    ex = doc.get("exit") or {}
    if ex.get("reason") and ex["reason"] not in ("finished", "steps reached"):
        lines += [
            "",
            f"partial results: the script {ex['sentence']}"
            if ex.get("sentence")
            else f"partial results: the script {ex['reason']}"
            + (f" ({ex['exception']})" if ex.get("exception") else ""),
        ]
    if not (ex.get("sentence") and ex.get("reason") not in ("finished", "steps reached")):
        lines += _outcome(doc)  # else the partial-results line already gave the exit code
    for note in notes_of(doc):
        lines.append(f"note: {note}")
    o = doc.get("overhead") or {}
    if o:
        from perfcore.report.words import overhead_long

        lines += ["", *overhead_long(o)]
    return "\n".join(lines)


def verdict_line(v: dict[str, Any]) -> str:
    """ "verdict: ..." at length after the INTERFERENCE line that a report prints first: the verdict itself,
    marked uncertain, without repeating the interference sentence."""
    plain = plain_words(v)
    if v.get("uncertain") and plain:
        return f"verdict: {plain} [uncertain: see INTERFERENCE above]"
    return f"verdict: {summary_words(v) or plain}"


def _outcome(doc: dict[str, Any]) -> list[str]:
    oc = doc.get("outcome") or {}
    return [f"the script {oc['sentence']}"] if oc.get("code") else []


def _startup(doc: dict[str, Any]) -> list[str]:
    su = doc.get("startup") or {}
    if not su:
        return []
    line = (
        f"  start-up: first step ended {fmt_ms(su['time_to_first_step_ms'])} after launch; "
        f"first step {fmt_ms(su['first_step_ms'])}"
    )
    if su.get("steady_step_ms") is not None:
        line += f" vs {fmt_ms(su['steady_step_ms'])} steady"
    out = ["", line]
    for ld in doc.get("loaders") or []:
        if ld.get("worker_startup_ms"):
            t = ", ".join(f"{v:.0f}" for v in ld["worker_startup_ms"][:6])
            more = ", ..." if len(ld["worker_startup_ms"]) > 6 else ""
            role = f" ({ld['role']})" if ld.get("role") else ""
            text = f"  DataLoader{role} at {ld['site']}: {ld['num_workers']} worker(s) took {t}{more} ms to give each epoch's first batch"
            if ld.get("persistent_workers_would_save_ms"):
                text += f"; persistent_workers=True would save ~{ld['persistent_workers_would_save_ms']:.0f} ms"
            out.append(text)
    return out
