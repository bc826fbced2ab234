"""The terminal report of a run (analysis.run_report.RunReport): per-label mean, share and a bar; verdict;
advice; and, with --explain, the trimmed breakdown's outlier steps (what they were against the median
step and where their extra time went, from analysis.uncertainty's figures); and compare's terminal text,
the table of two runs (analysis.compare.Comparison)."""

from __future__ import annotations

import shlex

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.compare import Comparison
from perfcore.analysis.findings import FindingKind
from perfcore.analysis.results import Interference, Verdict
from perfcore.analysis.run_parts import Outliers
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_share
from perfcore.report.words import fit, interference_sentence, interference_words, level_word
from perfcore.report.words.advice import evidence_of, test_of, text_of
from perfcore.report.words.findings import (
    evaluation_sentence,
    lines_text,
    memory_sentence,
    plan_reason,
    plan_sentence,
    step_source_words,
)
from perfcore.report.words.runs import (
    clock_sentence,
    crashed_early,
    details_words,
    missing_sentence,
    no_step_sentence,
    node_sentences,
    nodes_brief,
    notes_of,
    outcome_sentence,
    partial_words,
    straggler_sentence,
    trainer_lines,
    trainers_phrase,
    waiting_sentence,
)
from perfcore.report.words.verdict import (
    cause_words,
    change_sentence,
    outlier_change_words,
    step_words,
    verdict_long,
    verdict_short,
)

__all__ = [
    "render_text",
    "render_brief",
    "brief_table",
    "verdict_line",
    "interference_lines",
    "outliers_sentence",
    "render_compare",
]


BAR_WIDTH = 30


def _bar(fraction: float) -> str:
    full = int(round(fraction * BAR_WIDTH))
    return "#" * full + "." * (BAR_WIDTH - full)


def render_brief(r: RunReport, folder: object = None) -> str:
    """The report read at a glance (at most 15 lines, each fact once): a header line (steps, device,
    backend, p50/p90 step), the five-label table, one verdict line, at most two "try" lines, how the
    script ended when it failed, and where to read more. render_text is the whole of it (--explain)."""
    from perfcore.report.words.advice import overhead_short, starved_short, try_short

    if not r.steps:  # no step, or warm-up only: the full text is a line or two already
        return render_text(r)
    crash = crashed_early(r)
    lines = crash + brief_table(r)
    lines.append(f"verdict: {verdict_short(r.verdict)}")
    if r.nodes is not None and len(r.nodes.nodes) > 1:
        lines.append(nodes_brief(r.nodes))  # the job across machines: which node, not only which rank
    ld = r.training_loader
    site = ld.site if ld is not None else None
    # The user's own line that held the verdict's time (and the optimizer's change) come first; the
    # generic host advice ("a sampling profiler shows which lines") is what a named line replaces.
    extra = [s.strip() for s in lines_text(r)]
    recs = list(r.findings)
    # A loop's wait on its DataLoader names the loader's line; a loader recommendation names the same line
    # with the change's measured or expected gain, so it is said instead.
    loader_rec = any(f.kind in (FindingKind.MORE_WORKERS, FindingKind.CHEAPER_BATCHES) for f in recs)
    named = [s for s in extra if s.startswith("try:") and not (loader_rec and s.startswith("try: DataLoader at"))]
    recs = [f for f in recs if not (named and f.kind is FindingKind.HOST_GAPS)]
    tries = list(named)
    # Start-up is a caveat on the figures, not a change to the script: a note, never a try line.
    for f in (f for f in recs if f.kind is not FindingKind.STARTUP):
        tries.append(try_short(f, r.verdict, site, tuple(tries)))
    lines += [] if crash else [t for t in tries if t][:2]
    su = r.verdict.startup
    if not crash and su is not None and su.dominates:
        lines.append(
            f"note: start-up took {fmt_ms(su.ms)}, {fmt_share(su.share_of_run)} of the run; the table is the "
            "steps after it"
        )
    # A loader in the training process: its wait a step as the table quotes it (the verdict's estimate).
    in_process = ld is not None and ld.num_workers == 0 and r.starvation is not None and r.starvation.starved
    sd = r.steady()
    starved = starved_short(r.starvation, sd.ms["load"] if in_process else None, sd.step_ms)
    lines += [starved] if starved else []
    if not crash:  # else the first lines said how it ended
        lines += [said] if (said := partial_words(r)) else _outcome(r)
    if missing_sentence(r):
        lines.append(f"MISSING: {missing_sentence(r)}")
    o = r.overhead
    if o is not None and o.material:  # decided with the overhead: more than a rerun of the script moves its step by
        lines.append(overhead_short(o))
    lines.append(
        f"more: {folder}/report.html; all evidence: perfcore report {shlex.quote(str(folder))} --explain"
        if folder
        else "more: report.html; all evidence: --explain"
    )
    return "\n".join(lines)


def brief_table(r: RunReport) -> list[str]:
    """The header line (steps, device, the mean step and p90, a measured busy machine) and the five-label
    table of a run with measured steps: one definition of the step in all of it, the verdict's (the mean,
    without outlier steps where some were set apart), and a line saying so where setting them apart
    changes the picture."""
    st = r.step_time_ms
    intf = r.interference
    # The figures the verdict judges on (the trimmed steady step where outliers were set apart), so that
    # the header, the table and the verdict line quote one statistic; the plain means stay in --explain.
    sd = r.steady()
    step, ms, out = sd.step_ms, sd.ms, sd.outliers
    busy = (
        f"; BUSY: others used {intf.others_cores:.1f} of {intf.cores} cores"
        if intf is not None and intf.material and intf.others_cores is not None
        else ""
    )
    head = f"perfcore: {r.steps} steps (+{r.warmup_steps} warm-up){trainers_phrase(r)} on {r.device}"
    mean = (f"; mean step {fmt_ms(step)}" + (" less outliers" if out else ""), 0)
    header = fit((head, 0), mean, (f", p90 {fmt_ms(st.p90)}", 2), (busy, 1))
    if busy and busy not in header:  # the busy machine is said in the header whatever else gives way
        header = fit((head, 0), mean, (f"; BUSY: others {intf.others_cores:.1f}/{intf.cores} cores", 1))
    lines = [header]
    lines.append(f"  {'label':<9} {'per step':>9} {'share':>6}")
    for lb in LABELS:
        f = ms[lb] / step if step > 0 else 0.0
        lines.append(f"  {lb:<9} {fmt_ms(ms[lb]):>9} {fmt_share(f):>6} {_bar(f)}")
    held = _outliers_held(r, step, out)
    if held is not None:
        lines.append(
            f"  the {out} slow step(s) set apart ({fmt_share(out / r.steps)} of them) hold "
            f"{fmt_share(held)} of the time: with them the mean step is {fmt_ms(st.mean)}"
        )
    return lines


# Outlier steps set apart change the picture when the mean with them is this much above the one without.
OUTLIERS_CHANGE = 0.10


def _outliers_held(r: RunReport, step: float, out: int) -> float | None:
    """The share of the measured time the outlier steps held, where setting them apart moves the mean step by
    OUTLIERS_CHANGE or more (the tiny loop's 1999 of 19995 steps held half its time); None otherwise."""
    mean = float(r.step_time_ms.mean or 0.0)
    if not out or not mean or not step or mean - step < OUTLIERS_CHANGE * mean:
        return None
    kept = step * (r.steps - out)
    return max(0.0, 1.0 - kept / (mean * r.steps))


def render_text(r: RunReport, *, verdict: bool = True) -> str:
    """The whole report (--explain). verdict=False: the measurement only, where the verdict and its advice
    are said once elsewhere (the demo says them after diagnose has checked them)."""
    if not r.steps and not r.warmup_steps:
        said = no_step_sentence(r.no_step) if r.no_step is not None else "no step seen"
        return "\n".join([f"perfcore: {said}"] + _outcome(r))
    if not r.steps:
        # Ended during warm-up: say exactly that, and show the warm-up steps' split as it is.
        lines = [
            f"perfcore: the run ended during warm-up: {r.warmup_steps} warm-up step(s), none measured "
            f"(warm-up mean {fmt_ms(r.warmup_step_time_ms or 0)})",
            "  run longer, or count every step with --warmup 0",
        ]
        return "\n".join(lines + _startup(r) + _outcome(r))
    lines = _measured(r)
    if verdict:
        lines += ["", verdict_line(r.verdict)]
        v = r.verdict
        for c in v.named[1:]:
            lines.append(f"  also {c.bound} ({level_word(c.level)}): {cause_words(v, c)[1]}")
    if r.step_source:
        lines.append(f"  steps counted at: {step_source_words(r)}")
    for f in r.findings if verdict else ():
        lines.append(f"  - {text_of(f, r.loader_plan)}")
        lines.append(f"    evidence: {evidence_of(f, r.loader_plan)}" + (f"; try: {test_of(f)}" if test_of(f) else ""))
    lines += lines_text(r)  # the user's line that held the verdict's time; loader starvation
    lines += _kernels(r) + trainer_lines(r) + _ranks(r) + _details(r)
    lines += _startup(r) + _ending(r)
    for note in notes_of(r):
        lines.append(f"note: {note}")
    if r.overhead is not None:
        from perfcore.report.words.advice import overhead_long

        lines += ["", *overhead_long(r.overhead)]
    return "\n".join(lines)


def _measured(r: RunReport) -> list[str]:
    """The header, the step time (and its trimmed estimate) and the five labels' table with its intervals."""
    st = r.step_time_ms
    lines = [
        f"perfcore: {r.steps} steps measured ({r.warmup_steps} warm-up apart){trainers_phrase(r)}, "
        f"backend {r.backend}, "
        f"device {r.device}"
    ]
    lines += interference_lines(r.interference or r.verdict.interference)
    rb = r.breakdown_robust if r.breakdown_robust is not None and r.breakdown_robust.steps == r.steps else None
    lines += [
        f"step time  mean {fmt_ms(st.mean)}   p50 {fmt_ms(st.p50)}   p90 {fmt_ms(st.p90)}"
        + (f"   (warm-up mean {fmt_ms(r.warmup_step_time_ms)})" if r.warmup_step_time_ms else ""),
    ]
    if rb is not None and rb.step_ms:
        band = rb.step_ms_band
        lines.append(
            f"  trimmed mean {fmt_ms(rb.step_ms)}"
            + (f" ({100 * rb.level:.0f}% interval {fmt_band(band[0], band[1], fmt_ms)})" if band else "")
            + f" over {rb.kept_steps} of {rb.steps} steps; the verdict is judged on it"
        )
    if evaluation_sentence(r.evaluation):
        lines.append(f"  evaluation: {evaluation_sentence(r.evaluation)}")
    bands = rb.share_band if rb is not None else {}
    lines += [
        "",
        f"  {'label':<9} {'per step':>9} {'share':>6}"
        + (f" {'':<{BAR_WIDTH}} trimmed share ({100 * rb.level:.0f}% interval)" if bands else ""),
    ]
    for lb in LABELS:
        f = r.breakdown_fraction[lb]
        b = bands.get(lb)
        lines.append(
            f"  {lb:<9} {fmt_ms(r.breakdown_ms[lb]):>9} {fmt_share(f):>6} {_bar(f)}"
            + (f" {fmt_share(rb.share[lb])} ({fmt_band(b[0], b[1], fmt_share)})" if b else "")
        )
    if rb is not None and outliers_sentence(rb.outliers):
        lines.append(f"  {outliers_sentence(rb.outliers)}")
    return lines


def _kernels(r: RunReport) -> list[str]:
    lines = []
    if r.kernels:
        lines += ["", f"  {'top kernels':<60} {'count':>7} {'total ms':>10} {'mean us':>9}"]
        for k in r.kernels:
            name = k.name if len(k.name) <= 60 else k.name[:57] + "..."
            lines.append(f"  {name:<60} {k.count:>7} {k.total_ms:>10.2f} {k.mean_us:>9.1f}")
    if r.memcpy is not None and r.memcpy.by_direction:
        lines.append("")
        for d, v in r.memcpy.by_direction.items():
            lines.append(
                f"  memcpy {d}: {v.bytes / 2**20:.1f} MiB in {fmt_ms(v.ms)}, {v.pageable_bytes / 2**20:.1f} MiB pageable"
            )
    return lines


# Past this many ranks the per-rank rows are report.html's and run.json's: the nodes' rows say the job.
MAX_RANK_ROWS = 16


def _ranks(r: RunReport) -> list[str]:
    if len(r.ranks) <= 1 and not r.missing_ranks:
        return []
    head = " ".join(f"{lb:>9}" for lb in LABELS)
    lines = []
    job = r.nodes if r.nodes is not None and len(r.nodes.nodes) > 1 else None
    if job is not None:
        lines += ["", f"  {'node':<14} {'ranks':>6} {'step ms':>8} {head}  state"]
        for n in job.nodes:
            state = n.state.value + (f" for {', '.join(n.waits_for)}" if n.waits_for else "")
            cells = " ".join(f"{n.breakdown_ms.get(lb, 0.0):>9.2f}" for lb in LABELS)
            lines.append(f"  {n.host[:14]:<14} {len(n.ranks):>6} {n.step_ms:>8.2f} {cells}  {state}")
        lines += [f"  {x}" for x in node_sentences(job)]
        if r.clocks is not None:
            lines.append(f"  {clock_sentence(r.clocks)}")
    rows = r.ranks
    slow = {s.rank for s in r.stragglers}
    if len(rows) > MAX_RANK_ROWS:
        rows = tuple(k for k in rows if k.rank in slow)
        lines += ["", f"  {len(r.ranks)} ranks: each one's row is in report.html and run.json; the stragglers':"]
    else:
        lines.append("")
    lines.append(f"  {'rank':<6} {'step ms':>8} {head}" + ("  node" if job is not None else ""))
    for k in rows:
        cells = " ".join(f"{k.breakdown_ms[lb]:>9.2f}" for lb in LABELS)
        lines.append(f"  {k.rank!s:<6} {k.step_time_ms.mean:>8.2f} {cells}" + (f"  {k.host}" if job else ""))
    for s in r.stragglers:
        lines.append(f"  straggler: {straggler_sentence(s, on_hosts=job is not None)}")
    # Across machines the waiting is said per node (above): one line per rank would say it again.
    for w in r.waiting if job is None else ():
        lines.append(f"  {waiting_sentence(w)}")
    if missing_sentence(r):
        lines.append(f"  MISSING: {missing_sentence(r)}")
    return lines


def _details(r: RunReport) -> list[str]:
    """The compute split, kernel categories, loaders and the plan, memory, host CPU and a quiet machine."""
    said = details_words(r)
    lines = ["", f"  {said['host']}"] if "host" in said else []
    lines += [f"  {said['gpu']}"] if "gpu" in said else []
    if r.kernel_categories:
        lines.append(
            "  kernel time by category: "
            + ", ".join(f"{c} {100 * v.share:.0f}%" for c, v in r.kernel_categories.items())
        )
    roles = [ld for ld in r.loaders if ld.role]
    if "workers" in said:
        lines += ["", f"  DataLoader{' (the train loader)' if len(roles) > 1 else ''}: {said['workers']}"]
    if len(roles) > 1:
        # Each loader apart: an eval loader's batches never set the train loader's figures.
        lines.append(
            "  DataLoaders: "
            + "; ".join(
                f"{ld.role} at {ld.site or '?'}: {ld.batches or 0} batches"
                # A train loader also drawn for an evaluation pass: those batches apart, not in its count.
                + (f" (+{ld.eval_batches} in evaluation)" if ld.eval_batches else "")
                + (f", {fmt_ms(ld.worker_batch_ms)} each to make" if ld.worker_batch_ms is not None else "")
                for ld in roles
            )
        )
    if plan_sentence(r.loader_plan):
        lines.append(f"  loading ({plan_reason(r.loader_plan)}): {plan_sentence(r.loader_plan)}")
    if "memory" in said:
        memory = [memory_sentence(f.figures) for f in r.findings if f.kind.memory]
        lines += [f"  {said['memory']}"] + [f"  {s.upper()[:1]}{s[1:]}" for s in memory]
    lines += [f"  {said['cpu']}"] if "cpu" in said else []
    intf = r.interference or r.verdict.interference
    if intf is not None and not intf.material:
        lines.append(f"  {interference_sentence(intf)}")
    return lines


def _ending(r: RunReport) -> list[str]:
    """How the script ended, where it did not finish: partial results with its exit, else the exit code."""
    return ["", said] if (said := partial_words(r)) else _outcome(r)


def verdict_line(v: Verdict) -> str:
    """ "verdict: ..." at length after the INTERFERENCE line that a report prints first: the verdict itself,
    marked uncertain, without repeating the interference sentence."""
    if v.uncertain:
        return f"verdict: {verdict_long(v, lead=False)} [uncertain: see INTERFERENCE above]"
    return f"verdict: {verdict_long(v)}"


def interference_lines(f: Interference | None) -> list[str]:
    """Material interference, said before any number it inflates."""
    return [f"INTERFERENCE: {interference_words(f)}"] if f is not None and f.material else []


def _outcome(r: RunReport) -> list[str]:
    oc = r.outcome
    return [f"the script {outcome_sentence(oc)}"] if oc is not None and oc.code else []


def _startup(r: RunReport) -> list[str]:
    said = details_words(r)
    if "startup" not in said:
        return []
    out = ["", f"  {said['startup']}"]
    for ld in r.loaders:
        if ld.worker_startup_ms:
            t = ", ".join(f"{v:.0f}" for v in ld.worker_startup_ms[:6])
            more = ", ..." if len(ld.worker_startup_ms) > 6 else ""
            role = f" ({ld.role})" if ld.role else ""
            text = f"  DataLoader{role} at {ld.site}: {ld.num_workers} worker(s) took {t}{more} ms to give each epoch's first batch"
            if ld.persistent_workers_would_save_ms:
                text += f"; persistent_workers=True would save ~{ld.persistent_workers_would_save_ms:.0f} ms"
            out.append(text)
    return out


def outliers_sentence(o: Outliers | None) -> str:
    """The outlier steps set apart: how many, their wall time against the median step, and the label that
    held their extra time; "" when there were none (or their figures were not kept)."""
    if o is None or not o.count or o.median_step_ms is None or o.wall_ms is None:
        return ""
    top = o.excess_label
    share = o.excess_share.get(top) if top else None
    lo, hi = fmt_ms(o.wall_ms.min), fmt_ms(o.wall_ms.max)
    n = int(o.count)
    return (
        (f"1 outlier step set apart ({hi} " if n == 1 else f"{n} outlier steps set apart ({lo} to {hi} ")
        + f"against a median of {fmt_ms(o.median_step_ms)}"
        + (f"; {fmt_share(float(share))} of their extra time was {top}" if share is not None else "")
        + "): preemption, garbage collection or one-off work, not the loop's steady cost"
    )


def render_compare(doc: Comparison) -> str:
    """The terminal's compare: the step time, the verdict change, both verdicts, and the per-label and
    per-kernel-category table (ms per step)."""
    lines = [
        step_words(doc),
        *filter(None, [outlier_change_words(doc)]),
        change_sentence(doc),
        f"  A: {verdict_long(doc.a.verdict)}",
        f"  B: {verdict_long(doc.b.verdict)}",
        f"  {'label':<9} {'A ms':>9} {'B ms':>9} {'delta':>9}",
    ]
    for lb, v in doc.labels.items():
        lines.append(f"  {lb:<9} {v.a_ms:>9.2f} {v.b_ms:>9.2f} {v.delta_ms:>+9.2f}")
    if doc.kernel_categories:
        lines.append(f"  {'kernel category':<20} {'A ms':>9} {'B ms':>9} {'delta':>9}")
        for c, v in doc.kernel_categories.items():
            lines.append(f"  {c:<20} {v.a_ms:>9.2f} {v.b_ms:>9.2f} {v.delta_ms:>+9.2f}")
    return "\n".join(lines)
