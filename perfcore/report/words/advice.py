"""The advice into words: each finding's text and evidence, made from the facts analysis.advice decides
(kinds, numbers, the loader's settings; the loader plan's words are words.findings'), and the terminal's
short report: each piece of advice as one "try" line (a try line quotes what an experiment measured,
never the prediction beside it), loader starvation and perfcore's overhead in a line each (the verdict's
line is words.verdict.verdict_short). The long words (every interval, the evidence, the caveats) are in
--explain and report.html."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from perfcore.analysis.checks import Against, Experiment
from perfcore.analysis.findings import Finding, FindingKind, offered_check
from perfcore.analysis.results import Startup, Verdict
from perfcore.analysis.run_context import LoaderPlan
from perfcore.analysis.run_parts import Evaluation, Overhead
from perfcore.analysis.starvation import Starvation
from perfcore.analysis.status import Change
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_share, fmt_x
from perfcore.report.words import (
    WHAT,
    WIDTH,
    evidence_words,
    excess_words,
    fitting,
    gain_words,
    startup_sentence,
)
from perfcore.report.words import fit as _fit
from perfcore.report.words.findings import CHEAPER, evaluation_sentence, memory_words, plan_words, where_words

__all__ = [
    "advice_words",
    "PHRASES",
    "Phrase",
    "text_of",
    "evidence_of",
    "test_of",
    "TEST_WORDS",
    "ways_short",
    "try_short",
    "starved_short",
    "overhead_short",
    "overhead_long",
    "WHAT",
    "WIDTH",
]


# Each way to faster compute: (short, for the "try" line; long, for the advice's text).
_WAYS = {
    "bf16": ("bf16 autocast", "bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16) around forward and loss)"),
    "bf16_if_supported": (
        "bf16 autocast if the GPU has bf16",
        "bf16 autocast where the GPU has bf16 (Ampere or newer)",
    ),
    "compile": ("torch.compile", "torch.compile(model)"),
    "gpu": ("a GPU", "a GPU, where this compute would run many times faster"),
}
_STARTUP = (
    "Measure a longer run (--steps) before judging the steady state; to cut the start itself, build the "
    "dataset index once (cache it), keep workers (persistent_workers=True), and compile or warm up once."
)


def _expected(f: Mapping[str, Any]) -> str:
    """What a cause's advice would gain, after its text."""
    g = f.get("cause_gain")
    said = gain_words(g["speedup"], g.get("band")) if g else ""
    if not said:
        return ""
    if "workers_speedup" in f:  # a cheaper batch: the whole wait, beside what workers can hide of it
        return (
            f" Expected: a batch that costs nothing would make steps {said}; more workers "
            f"about {fmt_x(f['workers_speedup'])}."
        )
    a = f.get("achievable_gain")
    if a:
        a_said = gain_words(a["speedup"], a.get("band"))
        return (
            f" Expected: steps {a_said}, {fmt_ms(a['step_after_ms'])} a step: what the free cores "
            f"allow of the {fmt_x(g['speedup'])} that removing the wait would give."
            if a_said
            else ""
        )
    return f" Expected: steps {said}, {fmt_ms(g['step_after_ms'])} a step."


def _pageable(f: Mapping[str, Any]) -> str:
    ms = f.get("pageable_ms")
    return f"{f['pageable_bytes'] / 2**20:.1f} MiB per step copied host-to-device from pageable memory" + (
        f", {fmt_ms(ms)} per step" if ms else ""
    )


def _way_long(w: Mapping[str, Any]) -> str:
    if w["way"] == "optimizer":
        return (
            f"{w['snippet']} (the optimizer is {fmt_share(float(w['share']))} of the step; "
            f"its {w['keyword']} form runs it in fewer kernels)"
        )
    return _WAYS[w["way"]][1]


def ways_short(rec: Finding) -> list[str]:
    """The faster-compute advice's ways in a few words each, for the "try" line."""
    return [str(w["snippet"]) if w["way"] == "optimizer" else _WAYS[w["way"]][0] for w in rec.figures["ways"]]


@dataclasses.dataclass(frozen=True)
class Phrase:
    """One kind of advice in words: its change in a few words for the "try" line (None: the first clause of
    its text), and either a cause's text (`cause`: the gain and the cause's evidence follow it) or its own
    (text, evidence)."""

    change: str | Callable[[Finding, Verdict, tuple[str, ...]], str | None] | None = None
    cause: Callable[[Mapping[str, Any], str], str] | None = None
    own: Callable[[Mapping[str, Any], str], tuple[str, str]] | None = None


def _set_num_threads(f: Mapping[str, Any], at: str) -> tuple[str, str]:
    others = float(f.get("others_cores") or 0.0)
    return (
        f"Call torch.set_num_threads({f['fits']}) at the top of the script (or set OMP_NUM_THREADS="
        f"{f['fits']}): OpenMP threads spin waiting for each other when cores are oversubscribed, "
        "which can make a step many times slower.",
        f"{f['threads']} {'torch' if f.get('source') == 'torch' else 'OpenMP'} threads on the "
        f"{f['cpus']} CPU(s) this process may use"
        + (f" (other processes used {others:.1f})" if others >= 0.05 else ""),
    )


def _threads_change(rec: Finding, verdict: Verdict, said: tuple[str, ...]) -> str:
    over = verdict.oversubscribed
    # The script's own excess is said against its CPUs: others' momentary load can leave "0.0 free cores".
    spin = (
        "threads spin on oversubscribed cores"
        if not over
        else f"{over.threads} threads on {over.cpus} CPU(s)"
        if over.own and over.cpus
        else f"{over.threads} threads spin on {over.free_cores:.1f} free cores"
    )
    return f"torch.set_num_threads({rec.figures.get('fits', 1)}): {spin}"


_FASTER = "faster compute (bf16 autocast, torch.compile, fused optimizers)"


def _ways_change(rec: Finding, verdict: Verdict, said: tuple[str, ...]) -> str:
    """The advice's own ways, as it lists them, less those the try lines above said ("" where they said every
    one); its short form where it lists none."""
    ways = ways_short(rec)
    unsaid = [w for w in ways if not any(w in s for s in said)]
    return "faster compute: " + ", ".join(unsaid) if unsaid else "" if ways else _FASTER


def _cheaper_change(rec: Finding, verdict: Verdict, said: tuple[str, ...]) -> str:
    decoder = rec.measured(Against.ADVICE)
    if decoder is not None and not decoder.above_1x:
        return CHEAPER["fast"][0]  # experiment C measured the other decoder no faster: not advised
    return CHEAPER.get(str(rec.figures.get("decode")), CHEAPER["unknown"])[0]


# Every kind of advice in words: a new kind is its rule (analysis.advice_findings) and its phrase here.
PHRASES: dict[FindingKind, Phrase] = {
    FindingKind.BALANCE_RANKS: Phrase(
        "even out the slow rank's work (the others wait for it)",
        own=lambda f, at: (
            f"Even out rank {f['slow_rank']}'s work: {excess_words(f['excess_label'], why=True)}. "
            f"The other ranks would stop waiting about {fmt_ms(f['wait_ms'])} per step.",
            f"rank {f['waiting_rank']} waits {fmt_ms(f['wait_ms'])} of a {fmt_ms(f['step_ms'])} step "
            f"({fmt_share(f['wait_share'])}) for rank {f['slow_rank']}, whose {f['excess_label']} is "
            f"{fmt_ms(f['excess_ms'])} per step above the others'",
        ),
    ),
    # diagnose's experiment B measured this setting faster, beyond its noise
    FindingKind.WORKERS_MEASURED: Phrase(
        own=lambda f, at: (
            f"Set num_workers={f['num_workers']} in the DataLoader: experiment {f['experiment']} measured the "
            f"step {fmt_x(f['speedup'])} faster.",
            f"diagnose's experiment {f['experiment']} against its baseline, beyond both runs' noise and within "
            "what removing all loading can give",
        )
    ),
    FindingKind.PAGEABLE_DESPITE_PIN: Phrase(
        "pin the tensor copied from pageable memory (pin_memory is set)",
        own=lambda f, at: (
            f"In {at}: pin_memory=True is set, yet copies come from pageable memory: a tensor made in the "
            "loop rather than taken from the batch, or a custom batch type without a pin_memory() method. "
            "Pin that tensor (.pin_memory()) or make it on the device, and copy with "
            ".to(device, non_blocking=True).",
            _pageable(f),
        ),
    ),
    FindingKind.PIN_MEMORY: Phrase(
        "pin_memory=True, and .to(device, non_blocking=True)",
        own=lambda f, at: (
            f"In {at}: set pin_memory=True, and copy with .to(device, non_blocking=True): "
            "pageable copies are staged through a bounce buffer and block the host."
            + (
                f" Expected saving: up to {fmt_ms(f['pageable_ms'])} per step, the time those copies take now, "
                "once they overlap compute."
                if f.get("pageable_ms")
                else ""
            ),
            _pageable(f),
        ),
    ),
    FindingKind.MORE_WORKERS: Phrase(
        "more DataLoader workers (num_workers)",
        cause=lambda f, at: (
            f"Feed the loop faster in {at}: more workers (num_workers), "
            + ("persistent_workers=True, " if f.get("persistent_workers") else "")
            + "cheaper work per item (transforms done once, data cached as tensors)."
        ),
    ),
    FindingKind.CHEAPER_BATCHES: Phrase(_cheaper_change),
    FindingKind.PERSISTENT_WORKERS: Phrase("persistent_workers=True (workers start once, not every epoch)"),
    FindingKind.FEWER_WORKERS: Phrase("fewer workers: the hand-over from workers costs more than it hides"),
    FindingKind.DEEPER_PREFETCH: Phrase("a higher prefetch_factor"),
    FindingKind.OVERLAP_COPIES: Phrase(
        "overlap copies with compute (pinned memory, non_blocking, prefetch the next batch)",
        cause=lambda f, at: (
            "Overlap copies with compute: "
            + ("" if f.get("pinned") else f"pin_memory=True in {at}, ")
            + ".to(device, non_blocking=True), and copy the next batch while this one computes."
        ),
    ),
    FindingKind.OVERLAP_COMM: Phrase(
        "overlap communication with backward, or send less",
        cause=lambda f, at: (
            "Overlap communication with backward (DDP bucket_cap_mb, gradient accumulation "
            "with no_sync), or send less (bf16 gradients)."
        ),
    ),
    FindingKind.LAUNCH_OVERHEAD: Phrase(
        "remove syncs (.item(), .cpu()) from the loop; torch.compile or CUDA Graphs",
        cause=lambda f, at: (
            "The GPU idles between kernels: remove .item()/.cpu()/print of tensors from the loop, capture "
            + (
                "the step with CUDA Graphs (the model is compiled already: mode='reduce-overhead' does that)"
                if f.get("compiled")
                else "the step with torch.compile(mode='reduce-overhead') or CUDA Graphs"
            )
            + ", and raise the batch size."
        ),
    ),
    FindingKind.HOST_GAPS: Phrase(
        "move work out of the loop between steps (--explain names the lines that hold it)",
        cause=lambda f, at: (
            "Look at what your loop does between optimizer.step() and the next batch, and "
            "between forward and backward: loss and metric code outside the model, logging, .item() calls, "
            "checkpointing. On a CPU this time also holds tensor math outside modules (a functional loss, "
            "zero_grad, a manual p.data.add_ update): real compute, which a module (nn.MSELoss rather than "
            f"F.mse_loss), torch.optim{'' if f.get('compiled') else ', or torch.compile'} makes cheaper or at "
            "least visible. perfcore report --explain names the lines of your loop that hold this time."
        ),
    ),
    FindingKind.UNTIMED_HOST_WORK: Phrase(
        "time the rest of the step with timer.phase('name')",
        cause=lambda f, at: (
            "Time the rest of the step with timer.phase('name') to see what it is "
            "(logging, metrics, checkpointing, Python overhead)."
        ),
    ),
    FindingKind.SET_NUM_THREADS: Phrase(_threads_change, own=_set_num_threads),
    FindingKind.FASTER_COMPUTE: Phrase(
        _ways_change,
        own=lambda f, at: (
            f"The step is {'GPU ' if f.get('on_gpu') else ''}compute; what would make it faster: "
            + "; ".join(_way_long(w) for w in f["ways"])
            + ".",
            f"compute is {fmt_ms(f['compute_ms'])} of a {fmt_ms(f['step_ms'])} step",
        ),
    ),
    FindingKind.STARTUP: Phrase(
        "measure a longer run (--steps) before judging the steady state",
        own=lambda f, at: (_STARTUP, startup_sentence(Startup(**f["startup"]))),
    ),
    FindingKind.EVALUATION: Phrase(
        # Evaluation rows are outside the steps the table and verdict read.
        lambda rec, verdict, said: (
            f"evaluation took {fmt_share(rec.figures['share_of_wall'])} of the run, outside the steps above: "
            "evaluate less often, on fewer batches"
        ),
        own=lambda f, at: (
            f"Evaluation takes {fmt_share(f['share_of_wall'])} of the wall time: evaluate less often "
            "or on fewer batches, under torch.inference_mode(), with a larger batch size than training",
            evaluation_sentence(Evaluation(**f["evaluation"])),
        ),
    ),
    # A memory finding: its advice, and the finding as its evidence.
    **dict.fromkeys(
        (FindingKind.MEMORY_LEAK, FindingKind.MEMORY_PRESSURE, FindingKind.MEMORY_NEAR_CAPACITY),
        Phrase(own=lambda f, at: memory_words(f)[::-1]),
    ),
}


def _decoder_measured(rec: Finding) -> str:
    """What diagnose's experiment C measured of the other decoder, after the advice it tested."""
    c = rec.measured(Against.ADVICE)
    if c is None or c.experiment is not Experiment.DECODER:
        return ""
    if not c.below_1x:
        return f" Measured: {c.name} alone gave {fmt_x(c.measured_speedup)}."
    # Said from C's change beside its figure: below 1x inside the noise is "no faster", not "slower".
    how = "made steps slower here" if c.change is Change.SLOWER else "made steps no faster"
    return f" Not the decoder: {c.name} {how} ({fmt_x(c.measured_speedup)}); cache or pre-resize the images instead."


def advice_words(rec: Finding, plan: LoaderPlan | None = None) -> tuple[str, str]:
    """One finding's (text, evidence) from its figures; plan: the run's loader plan, which a load cause's
    advice is made of."""
    f, phrase = rec.figures, PHRASES.get(rec.kind, Phrase())
    at = where_words(f.get("loader") or {})
    if phrase.own is not None:
        return phrase.own(f, at)
    if f.get("plan"):  # the plan's own words where it is at hand, else only what it would gain
        text = plan_words(plan)[1] if plan is not None else ""
    else:
        text = phrase.cause(f, at) if phrase.cause is not None else ""
    because = evidence_words(f["cause_facts"]) if isinstance(f.get("cause_facts"), Mapping) else ""
    return text + (_expected(f) if text or f.get("plan") else "") + _decoder_measured(rec), because


# The perfcore command that tests a piece of advice, by the code analysis/ gives it.
TEST_WORDS = {
    "diagnose": "perfcore diagnose (synthetic data measures the step without loading)",
    "graph": "perfcore graph",
}


def test_of(rec: Finding) -> str:
    """The command that tests the advice, from its code."""
    return TEST_WORDS.get(rec.test or "", "")


def text_of(rec: Finding, plan: LoaderPlan | None = None) -> str:
    """The finding's advice in words."""
    return advice_words(rec, plan)[0]


def evidence_of(rec: Finding, plan: LoaderPlan | None = None) -> str:
    """The finding's evidence in words."""
    return advice_words(rec, plan)[1]


def _change(rec: Finding, verdict: Verdict, said: tuple[str, ...] = ()) -> str | None:
    if rec.change:  # the settings themselves, with their numbers
        return "set " + ", ".join(f"{k}={v}" for k, v in rec.change.items())
    change = PHRASES.get(rec.kind, Phrase()).change
    return change(rec, verdict, said) if callable(change) else change


def starved_short(s: Starvation | None, in_process_ms: float | None = None, step_ms: float | None = None) -> str | None:
    """The loader's waits in one line. A loader in the training process (num_workers=0, `in_process_ms` its
    wait a step) makes every step wait by construction: said as its cost per step, not as starvation.
    Otherwise how many steps waited, over what, and the typical and worst wait; the longest run of them is
    in --explain."""
    if in_process_ms is not None and in_process_ms > 0:
        share = f" ({fmt_share(in_process_ms / step_ms)})" if step_ms else ""
        return f"loading runs in the training process (num_workers=0): {fmt_ms(in_process_ms)} a step{share}"
    if s is None or not s.starved:
        return None
    return _fit(
        (
            f"steps that waited on the loader: {s.starved} of {s.steps} ({fmt_share(float(s.share))}) over "
            f"{fmt_ms(float(s.threshold_ms))}",
            0,
        ),
        (
            f"; it waited {fmt_ms(float(s.p50_wait_ms))}"  # one step: its p50 and p95 are the same wait
            if s.starved == 1
            else f"; their p50 wait {fmt_ms(float(s.p50_wait_ms))}, p95 {fmt_ms(float(s.p95_wait_ms))}",
            1,
        ),
    )


def _measured_gain(rec: Finding) -> list[str]:
    """What an experiment measured of this advice, longest first (the band, then the experiment's full
    name give way to the line's width), or [] when none did: diagnose's figure, or the bound experiment A
    set with no loading at all, in place of the prediction (findings.offered_check: a measurement outranks
    a model, and nothing below 1x is offered)."""
    c = offered_check(rec.checks)
    if c is None:
        return []
    if c.against is Against.ADVICE:
        b = c.measured_band
        band = f" ({fmt_band(*b)})" if b and len(b) == 2 and None not in b and b[0] != b[1] else ""
        head, exp = f"measured {fmt_x(c.measured_speedup)}", c.name
        return [f"{head}{band} ({exp})", f"{head} ({exp})", f"{head} ({exp.split(':')[0]})"]
    x, exp = fmt_x(c.measured_speedup), c.name.split(":")[0]
    return [f"up to {x} ({exp}, measured with no loading)", f"up to {x} (measured without loading)"]


def try_short(rec: Finding, verdict: Verdict, site: str | None, said: tuple[str, ...] = ()) -> str:
    """One piece of advice as a "try" line: where in the user's code, the change, its expected gain; the
    gain an experiment measured where one did (diagnose's), never the prediction beside it. said: the try
    lines above it (a change one of them names, the optimizer's fused form, is not named again); "" when
    everything the advice would name is said already."""
    change = _change(rec, verdict, said)
    if change == "":  # everything the advice would name is said already
        return ""
    if change is None:  # a finding with its own words (memory): its first clause
        change = text_of(rec).split(": ")[0].split(". ")[0]
    measured = _measured_gain(rec)
    if measured:
        # The change's own gloss gives way last of all: "cheaper batches (...)" reads as "cheaper batches".
        changes = [change, change.split(" (")[0]]
        lines = [f"try: {ch}: {m}" for ch in changes for m in measured]
        if site:
            lines.insert(0, f"try: {site}: {change}: {measured[0]}")
        return fitting(lines)
    g = rec.offered  # the prediction, unless the cause removed altogether measured no gain above 1x
    gains = [gain_words(g.speedup, g.band), gain_words(g.speedup)] if g is not None and rec.cause in WHAT else [""]
    where = f"{site}: " if site and rec.cause in ("load", "transfer") else ""
    # Within the terminal's width: the band gives way first, then the change's gloss.
    lines = [f"try: {where}{ch}" + (f": {gw}" if gw else "") for ch in (change, change.split(" (")[0]) for gw in gains]
    return fitting(lines)


def _or(v: float | None, default: float) -> float:
    return default if v is None else v


def _pauses(o: Overhead) -> str:
    return f"{o.pauses} pause{'s' if o.pauses != 1 else ''} (settling, checkpoints)"


def overhead_short(o: Overhead) -> str:
    """perfcore's cost: per step as a typical step pays it, and its pauses (settling, checkpoints, an
    import: own work many steps long, in a few steps) apart, when it had any (the HTML's warning too).
    "At least": the figure is perfcore's count of its own work and calls, each at its cost measured as a
    step of real work leaves the caches; the optimizer's hook loop and the like are in no count (~1 us a step
    on the tiny bench loop, bench/RESULTS.md)."""
    steady = o.steady_ms_per_step
    typical = steady is not None  # what a typical step pays (a warm-up's compile, sampled, is not in it)
    ms, share = (steady, o.steady_fraction or 0) if typical else (o.ms_per_step, o.fraction)
    line = f"overhead: perfcore added at least ~{fmt_ms(ms)}/step ({fmt_share(share)})"
    if typical and o.pauses:
        return f"{line}, and {fmt_ms(o.pause_ms_total or 0)} in {_pauses(o)}"
    if typical and o.fraction > share:  # the run paid more than its typical step says
        line += f"; the whole run ~{fmt_ms(o.ms_per_step)}/step ({fmt_share(o.fraction)})"
    return line


def overhead_long(o: Overhead) -> list[str]:
    """The full report's overhead: the typical step's figure and the whole run's, then what was counted, each
    part a count times its measured cost (the parts under 1% of the total are left out)."""
    steady = o.steady_ms_per_step is not None
    whole = f"~{fmt_ms(o.ms_per_step)}/step ({fmt_share(o.fraction)})"
    if o.pauses:
        whole += f", {fmt_ms(o.pause_ms_total or 0)} of it in {_pauses(o)}"
    lines = [f"perfcore overhead: at least {whole}"]
    if steady:
        lines = [
            f"perfcore overhead: at least ~{fmt_ms(o.steady_ms_per_step)} a typical step "
            f"({fmt_share(o.steady_fraction or 0)})",
            f"  the whole run: {whole}",
        ]
    phases = o.phases_per_step * o.per_phase_ns / 1e6
    # The typical step's parts where the run kept them apart (the counter's calls, own work between the pauses,
    # the sampler's share), so the parts add up to the figure above; else the whole run's.
    sync = o.sync_calls_ms_per_step or 0.0
    own, sampler = o.own_ms_per_step or 0.0, o.sampler_ms_per_step or 0.0
    if steady:
        sync = _or(o.steady_sync_calls_ms_per_step, sync)
        sampler = _or(o.sampler_steady_ms_per_step, sampler)
        # A run from before the parts were kept: own work between the pauses, from its totals.
        between = own * (1 - (o.pause_ms_total or 0.0) / o.own_ms_total) if o.own_ms_total else own
        own = _or(o.steady_own_ms_per_step, max(0.0, between))
    passed, fetch = o.passed_ms_per_step or 0.0, o.fetch_ms_per_step or 0.0
    tracing = o.tracing_ms_per_step or 0.0
    parts = [
        (phases, f"phases {o.phases_per_step:.3g} x {fmt_ms(o.per_phase_ns / 1e6)}"),
        (passed, f"hook calls {fmt_ms(passed)}"),
        (sync, f".item() counts {fmt_ms(sync)}"),
        (fetch, f"fetches {fmt_ms(fetch)}"),
        (sampler, f"line sampler {fmt_ms(sampler)}"),
        (tracing, f"kernel tracing {fmt_ms(tracing)}"),
        (own, f"own work {fmt_ms(own)}"),
    ]
    total = sum(v for v, _ in parts)
    said = [w for v, w in parts if total > 0 and v >= 0.01 * total]
    line = "  a step:"
    for w in said:  # as many lines as the width asks
        if len(line) + len(w) + 2 > WIDTH:
            lines.append(line)  # its comma says the list goes on below
            line = "   "
        line += f" {w},"
    if said:
        lines.append(line.rstrip(","))
    if o.hooks == "not included":
        lines.append(
            "  (the timer's own count; perfcore run's hooks add more: bench/bench_run_overhead.py measures them)"
        )
    return lines
