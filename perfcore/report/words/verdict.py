"""The verdict in words, from the facts analysis.verdict decides (results.Verdict), in two forms: the short
line (verdict_short: the terminal's verdict line, a chart's, a page's and the live status's title) and the
long sentence (verdict_long: --explain and the HTML "why" panel, with or without what inflated the steps
said first); the HTML card (card_words) is the short line's first part and at most two short facts.
With it, the two results said as verdicts are: compare's (what changed between two runs, each word
chosen from the status beside its number) and health's (the verdict's summary, then the seed method's
busy check against its threshold, and what a heartbeat in the busy series means)."""

from __future__ import annotations

from perfcore.analysis.checks import Experiment
from perfcore.analysis.command_results import HealthResult, Heartbeat
from perfcore.analysis.compare import Comparison
from perfcore.analysis.results import Cause, Level, Straggle, Verdict
from perfcore.analysis.status import Change
from perfcore.analysis.uncertainty import LEVEL, steps_to_settle
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_share, fmt_x
from perfcore.analysis.verdict import CRITICAL_SHARE, WARN_SHARE
from perfcore.report.words import (
    LOADING_CAUSE,
    NO_STEPS,
    WHAT,
    WIDTH,
    check_text,
    evidence_words,
    excess_words,
    fit,
    gain_words,
    interference_sentence,
    level_word,
    loading_text,
    startup_sentence,
    what_of,
)

__all__ = [
    "verdict_short",
    "verdict_long",
    "card_words",
    "cause_words",
    "change_sentence",
    "step_words",
    "health_summary",
    "heartbeat_meaning",
    "health_sentence",
    "gains_text",
]


_FORWARD_ONLY_GAIN = "this forward-only loop's steps"


def _share_band(band) -> str:
    return f", {100 * LEVEL:.0f}% interval {fmt_band(band[0], band[1], fmt_share)}" if band else ""


def _settle(steps: int, c: Cause, tier: float) -> str:
    more = steps_to_settle(steps, c.share, c.share_band, tier) if steps and c.share_band else None
    if more and more > steps:
        return f"about {more} steps (--steps {more}) or a quieter machine would settle it"
    return "more steps or a quieter machine would settle it"


def _short_what(t: Verdict, c: Cause) -> str:
    return what_of(c.label, t.on_gpu).split(" (")[0]


def _core(t: Verdict) -> str:
    """The decision itself, at length: the named cause, its cost, share and tier, and the gain of removing
    it; or the borderline cause and what would settle it; or healthy compute."""
    named = t.named
    sure = [c for c in named if c.level is not Level.BORDERLINE]
    step = t.step_ms
    if sure:
        top = sure[0]
        what = what_of(top.label, t.on_gpu)
        bound = top.bound + (
            f" ({LOADING_CAUSE.get(t.loading.kind, 'data loading')})" if top.label == "load" and t.loading else ""
        )
        tier = CRITICAL_SHARE if top.level is Level.CRITICAL else WARN_SHARE
        gain = gain_words(top.gain.speedup, top.gain.band)
        of = _FORWARD_ONLY_GAIN if t.forward_only else "steps"
        said = (
            f"{bound}: {what} costs {fmt_ms(top.ms_per_step)} of each {fmt_ms(step)} step "
            f"({fmt_share(top.share)}{_share_band(top.share_band)}; {level_word(top.level)} at >= {100 * tier:.0f}%)"
            + (f"; removing it would make {of} {gain}" if gain else "")
        )
        if top.borderline_tier == CRITICAL_SHARE:
            said += (
                f". Near the {100 * CRITICAL_SHARE:.0f}% line, so said as {level_word('warn')} in every run; "
                + _settle(t.steps, top, CRITICAL_SHARE)
            )
        others = [c for c in named if c is not top]
        if others:
            said += ". Also " + ", ".join(
                f"{_short_what(t, c)} {fmt_ms(c.ms_per_step)} ({fmt_share(c.share)}, {level_word(c.level)})"
                for c in others
            )
        return said
    if named:
        top = named[0]
        return (
            f"compute-bound, {what_of(top.label, t.on_gpu)} near the {100 * WARN_SHARE:.0f}% line: it costs "
            f"{fmt_ms(top.ms_per_step)} of each {fmt_ms(step)} step ({fmt_share(top.share)}"
            f"{_share_band(top.share_band)}), said so whichever side of the line a run lands: "
            + _settle(t.steps, top, WARN_SHARE)
        )
    big = t.ranked[0] if t.ranked and t.ranked[0].ms_per_step > 0 else None
    return (
        f"compute-bound (healthy): compute is {fmt_share(t.compute_ms / step if step else 0)} of each "
        f"{fmt_ms(step)} step; nothing outside compute reaches {100 * WARN_SHARE:.0f}%"
        + (f" (largest: {_short_what(t, big)} {fmt_ms(big.ms_per_step)}, {fmt_share(big.share)})" if big else "")
    )


def _straggler_lead(job: Straggle) -> str:
    """A job held up by one rank: who waits, how long, and what the slow rank does more of."""
    share = job.wait_share
    level = level_word("critical" if share >= CRITICAL_SHARE else "warn")
    ex = str(job.excess_label)
    return (
        f"rank {job.slow_rank} holds up the job: rank {job.waiting_rank} waits "
        f"{fmt_ms(job.wait_ms)} of each {fmt_ms(job.step_ms)} step ({fmt_share(share)}, "
        f"{level}) in collectives for it; its own work is {fmt_ms(job.work_ms)} against "
        f"{fmt_ms(job.others_work_ms)} on the other ranks, the excess in {ex}: "
        f"{excess_words(ex)} {fmt_ms(job.excess_ms)} more per step"
    )


def verdict_long(t: Verdict, lead: bool = True) -> str:
    """The verdict at length (--explain, the HTML "why" panel): the decision, outlier steps set apart,
    start-up where it dominates, the rank it was judged on, diagnose's checks and what loading is.
    lead: spinning threads and a material interference finding first (what inflated the steps); without it,
    what a quiet machine would read, or a report that says the interference above."""
    if not t.decided:
        return NO_STEPS
    said = _core(t)
    if t.outliers:
        said += f" ({t.outliers} outlier step(s) set apart)"
    if t.startup is not None and t.startup.dominates:
        said += f". Start-up dominates: {startup_sentence(t.startup)}"
    if t.focus_rank is not None:
        said += f" on rank {t.focus_rank}; the other ranks wait for it in comm"
    checks = [check_text(c) for c in t.checks]
    how = loading_text(t.loading) if t.loading is not None else ""
    if checks or how:
        said += "".join(f". {c[0].upper()}{c[1:]}" for c in checks if c) + (f". {how}." if how else ".")
    if t.straggler is not None:
        said = f"{_straggler_lead(t.straggler)}. On rank {t.straggler.slow_rank}: {said}"
    intf = t.interference
    # Threads that found their cores taken already say how much of the machine the others used: the
    # interference sentence would say it again.
    material = lead and intf is not None and intf.material and t.threads_busy is None
    return _led(said, _threads(t) if lead else "", interference_sentence(intf) if material else "")


def _led(said: str, *first: str) -> str:
    """`said` after the sentences that go first (what inflated the steps; the empty ones left out), begun
    again as a sentence where any does."""
    first = tuple(s for s in first if s)
    return ". ".join([*first, f"{said[0].upper()}{said[1:]}"]) if first else said


def _threads(t: Verdict) -> str:
    """What spinning threads did to the steps, said before the verdict on them."""
    over, busy = t.oversubscribed, t.threads_busy
    if over is not None:
        kind = "torch" if over.source == "torch" else "OpenMP"
        return (
            f"{over.threads} {kind} threads on {over.cpus} CPU(s): OpenMP threads spin when cores are "
            f"oversubscribed, which can make steps many times slower: torch.set_num_threads({over.fits})"
        )
    if busy is not None:
        kind = "torch" if busy.source == "torch" else "OpenMP"
        return (
            f"{busy.threads} {kind} threads had {float(busy.free_cores):.1f} free core(s) while other "
            f"processes used {float(busy.others_cores):.1f} of {busy.cpus} cores: their threads spin "
            "when cores are taken, so these steps are slower than the script's own; measure on a quieter "
            "machine before changing its thread count"
        )
    return ""


def cause_words(t: Verdict, c: Cause) -> tuple[str, str]:
    """A named cause's (what, evidence) in words."""
    facts = {
        "label": c.label,
        "ms_per_step": c.ms_per_step,
        "share": c.share,
        "share_band": c.share_band,
        "step_ms": t.step_ms,
        "on_gpu": t.on_gpu,
        "measured_by": t.measured_by.get(c.label),
    }
    return what_of(c.label, t.on_gpu), evidence_words(facts)


def _top(t: Verdict) -> Cause | None:
    return next((c for c in t.named if c.label == t.primary), None)


def _name(t: Verdict) -> str | None:
    """The verdict's name: its bound and level ("input-bound (major)", "input-bound on rank 1 (moderate)",
    "compute-bound (healthy)", "straggler rank 1 (major)"); None where it names no cause."""
    if t.level is Level.HEALTHY:
        return "compute-bound (healthy)"
    job = t.straggler
    if job and t.bound == "straggler":
        return f"straggler rank {job.slow_rank} ({level_word(t.level)})"
    top = _top(t)
    if top is None:
        return None
    on = f" on rank {job.slow_rank}" if job else ""  # the slow rank's steps, not the table's rank
    if t.level is Level.BORDERLINE:  # said the same whichever side of the line a run's estimate fell
        return f"compute-bound{on} (near the {100 * WARN_SHARE:.0f}% line)"
    return f"{top.bound}{on} ({level_word(top.level)})"


def _head(t: Verdict) -> list[tuple[str, int]]:
    """The verdict's short line as ranked parts (fit drops the lowest first); the first part is the
    verdict's name and what its time is, the HTML card's headline."""
    busy = (" [uncertain: busy]" if t.uncertain else "", 1)  # the header line says how busy, as measured
    if t.level is Level.HEALTHY:
        big = t.ranked[0] if t.ranked and t.ranked[0].ms_per_step > 0 else None
        return [
            (f"{_name(t)}: nothing else reaches {100 * WARN_SHARE:.0f}% of a {fmt_ms(t.step_ms)} step", 0),
            (f" (largest: {big.label}, {fmt_share(big.share)})" if big else "", 2),
            busy,
        ]
    job = t.straggler
    if job and t.bound == "straggler":
        said = (
            f"{_name(t)}: rank {job.waiting_rank} waits {fmt_ms(job.wait_ms)} of a {fmt_ms(job.step_ms)} step "
            f"({fmt_share(job.wait_share)}) for it, {job.excess_label} +{fmt_ms(job.excess_ms)}"
        )
        return [(said, 0), busy]
    top = _top(t)
    if top is None:
        return [(verdict_long(t, lead=False), 0)]
    band = fmt_band(top.share_band[0], top.share_band[1], fmt_share) if top.share_band else ""
    if t.level is Level.BORDERLINE and not job:
        return [
            (f"compute-bound; {WHAT[top.label]} {fmt_share(top.share)} of a {fmt_ms(t.step_ms)} step", 0),
            (f" ({band})" if band else "", 3),
            (f", near the {100 * WARN_SHARE:.0f}% line", 0),
            busy,
        ]
    near = top.borderline_tier if t.level is not Level.BORDERLINE else None
    # The gain of removing it is said once, on the "try" line that names the change; the interval gives
    # way to the wait for the slow rank and to the busy mark.
    # The step's own figure gives way before the busy mark: the header line says the same mean step.
    return [
        (f"{_name(t)}: {WHAT[top.label]}", 0),
        (f", {fmt_ms(top.ms_per_step)}", 0),
        (f" of a {fmt_ms(t.step_ms)} step", 2),
        (f" ({fmt_share(top.share)}", 0),
        (f", interval {band}" if band and not job else "", 3),
        (")", 0),
        (f", near the {100 * near:.0f}% line" if near else "", 2),
        (f"; rank {job.waiting_rank} waits {fmt_share(job.wait_share)} for it" if job else "", 1),
        busy,
    ]


def verdict_short(t: Verdict) -> str:
    """The verdict in one line: the bound and its level, what the time is, its ms and share of the step
    (with the interval, where it fits), and a mark when a measured busy machine makes it uncertain. It fits
    the terminal's width after "verdict: ", and titles a chart, a page and the live status as it is."""
    if not t.decided:
        return NO_STEPS
    return fit(*_head(t), width=WIDTH - len("verdict: "))


def card_words(
    t: Verdict, why: str | None = None, *, crash: tuple[str, ...] | list[str] = (), none: str = ""
) -> tuple[str, list[str], str]:
    """The HTML verdict card's words (head, short lines, the "why" panel's sentence): the short line's
    first part (the verdict's name and what its time is; the card's tiles give its ms, share and gain), at
    most two short lines (a crash's first line, why the verdict is uncertain, diagnose's check of it, what
    would settle a borderline one) and `why` (default the long form) in the panel. A verdict not yet
    decided (a stage that measures only) shows `why`, else `none`, as the headline."""
    if not t.decided:
        return str(why or none or "no verdict"), [], ""
    lines = list(crash[:1])
    if t.uncertain:
        lines.append("uncertain: other processes used the machine during the run (see Warnings)")
    check = next((c for c in t.checks if c.status is not None), None)
    if check is not None and check.measured_speedup is not None:  # diagnose's test of the verdict
        lines.append(
            f"checked: {check.name} measured {fmt_x(check.measured_speedup)}"
            + (f" against {fmt_x(check.predicted_speedup)} predicted" if check.predicted_speedup else "")
            + f": {check.status.value}"
        )
    top = _top(t)
    if top is not None and top.share_band is not None and (t.level is Level.BORDERLINE or top.borderline_tier):
        tier = top.borderline_tier or WARN_SHARE
        more = steps_to_settle(t.steps, top.share, top.share_band, tier) if t.steps else None
        lines.append(
            f"near the {100 * tier:.0f}% line: its {100 * LEVEL:.0f}% interval "
            f"{fmt_band(top.share_band[0], top.share_band[1], fmt_share)}; "
            + (
                f"--steps {more} or a quieter machine would settle it"
                if more and more > t.steps
                else "more steps would settle it"
            )
        )
    return _head(t)[0][0], lines[:2], why if why is not None else verdict_long(t)


def _verdict_name(t: Verdict) -> str:
    """The verdict in a few words (its bound and level), for compare's before -> after."""
    return (_name(t) or str(t.bound)) if t.decided else NO_STEPS


def change_sentence(doc: Comparison) -> str:
    """Whether the verdict changed: its name before and after, and the primary cause or the tier that moved."""
    a, b = doc.a.verdict, doc.b.verdict
    if not doc.verdict_changed:
        return f"verdict unchanged: {_verdict_name(a)}"
    if doc.primary_changed:
        return (
            f"verdict changed: {_verdict_name(a)} -> {_verdict_name(b)}; primary cause "
            f"{a.primary or 'none'} -> {b.primary or 'none'}"
        )
    return (
        f"verdict changed: {_verdict_name(a)} -> {_verdict_name(b)} (same primary cause, "
        f"{level_word(a.level)} -> {level_word(b.level)})"
    )


# B against A, by the change's status: the word sits beside the ratio it describes.
_CHANGE = {Change.FASTER: "B faster", Change.SLOWER: "B slower", Change.WITHIN_NOISE: "within the runs' noise"}


def step_words(doc: Comparison) -> str:
    """The step time from A to B, the change and the ratio, with what the status says of it."""
    said = _CHANGE.get(doc.change, "") if doc.change is not None else ""
    noise = doc.noise_ms
    if said and noise is not None:
        said += f" ({fmt_ms(noise)})" if doc.change is Change.WITHIN_NOISE else f" (beyond the noise, {fmt_ms(noise)})"
    tail = f", {said}" if said else ""
    return (
        f"step time: A {fmt_ms(doc.a.step_ms)} -> B {fmt_ms(doc.b.step_ms)} "
        f"({doc.step_time_change_pct:+.1f}%, speedup {fmt_x(doc.speedup)}{tail})"
    )


def outlier_change_words(doc: Comparison) -> str | None:
    """The plain means' change beside the steady step's, where the outlier steps alone moved it."""
    if not doc.outliers_moved:
        return None
    return f"  mean step, outlier steps included: {doc.mean_change_pct:+.1f}% (the steady steps above set them apart)"


_FORWARD_ONLY_NOTE = "a training step, with backward and the optimizer, gains less: perfcore run or diagnose measure it"


def health_summary(doc: HealthResult) -> str:
    """The verdict's plain summary (when health decided one), then the busy line."""
    check = doc.busy_check
    threshold = float(check.threshold or 0.6)
    busy = float(doc.busy_mean or 0.0)
    what = "GPU utilisation" if doc.busy_source == "gpu_util" else "compute share of each step (no GPU here)"
    line = f"{what} {100 * busy:.0f}% ({'>=' if busy >= threshold else '<'} {100 * threshold:.0f}%)"
    if check.small_work:
        line += (
            "; low utilisation with no avoidable cause above the threshold: the device's work is small "
            "(short kernels), not blocked"
        )
    verdict = verdict_long(doc.verdict, lead=False) if doc.verdict is not None and doc.verdict.decided else ""
    return (
        verdict
        + (f" ({_FORWARD_ONLY_NOTE})" if check.forward_only else "")
        + (". " if check.decided else "")
        + f"{line[0].upper()}{line[1:]}"
    )


def heartbeat_meaning(hb: Heartbeat, busy_source: str) -> str:
    """What a period in the busy series means (capture.sampler.heartbeat found it)."""
    unit = "s" if busy_source == "gpu_util" else "s (in steps)"
    return (
        f"utilisation swings between busy and idle every {hb.period_s:.2f} {unit}: the loader delivers in "
        "bursts (each worker hands over a batch, then all are busy decoding while the device waits); more "
        "workers, a higher prefetch_factor or cheaper batches smooth it"
    )


def health_sentence(doc: HealthResult) -> str:
    """Health's summary as its page and its verdict line say it: the interference sentence first when that
    is material."""
    intf = doc.verdict.interference if doc.verdict is not None else None
    return _led(health_summary(doc), interference_sentence(intf) if intf is not None and intf.material else "")


def gains_text(run: Verdict, diag: Verdict) -> str:
    """What removing loading gains: run's prediction for a training step beside diagnose's measurement."""
    c = next((c for c in run.named if c.label == "load"), None)
    r = gain_words(c.gain.speedup, c.gain.band) if c is not None else ""
    check = next((c for c in diag.checks if c.experiment is Experiment.SYNTHETIC), None)
    if not r:
        return ""
    return f"removing loading: {r} for a training step" + (f"; {check_text(check)}" if check else "")
