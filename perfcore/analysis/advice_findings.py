"""The advice as an ordered list of short rules over one AdviceEvidence: each reads the evidence by attribute and
yields its findings (kinds and figures, which report.words.advice puts into words). A straggler every rank
waits for and pageable copies come first, as each is certain and cheap to act on; then each named cause's
advice, ranked as the verdict ranks them; then the threads, evaluation, compute, memory and start-up
findings. A new kind of advice is a rule here and its phrase in report.words.advice."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

from perfcore.analysis.advice_evidence import AdviceEvidence
from perfcore.analysis.findings import Finding, FindingKind, Site
from perfcore.analysis.gain import expected_gain
from perfcore.analysis.loader_plan import PlanKind, loader_facts
from perfcore.analysis.results import Cause, Gain, Level
from perfcore.analysis.verdict import CRITICAL_SHARE, WARN_SHARE

__all__ = ["RULES", "CAUSE_RULES", "advise", "compute_ways"]

# The straggler's figures the advice is made from.
_STRAGGLER_FACTS = ("slow_rank", "waiting_rank", "excess_label", "excess_ms", "wait_ms", "wait_share", "step_ms")
# The perfcore command that tests a piece of advice (report.words.advice.TEST_WORDS says it).
_DIAGNOSE, _GRAPH = "diagnose", "graph"
# The advice each loader plan kind gives (a plan kind not here: more workers).
_PLAN_ADVICE = {
    PlanKind.PERSISTENT_WORKERS: FindingKind.PERSISTENT_WORKERS,
    PlanKind.CHEAPER_FETCH: FindingKind.CHEAPER_BATCHES,
    PlanKind.HANDOVER: FindingKind.FEWER_WORKERS,
    PlanKind.NO_FREE_CORE: FindingKind.CHEAPER_BATCHES,
    PlanKind.MEASURED_NO_HELP: FindingKind.CHEAPER_BATCHES,
    PlanKind.DEEPER_PREFETCH: FindingKind.DEEPER_PREFETCH,
}


def _gain_facts(g: Gain) -> dict[str, Any]:
    return {"speedup": g.speedup, "band": list(g.band) if g.band else None, "step_after_ms": g.step_after_ms}


def balance_ranks(ev: AdviceEvidence) -> Iterator[Finding]:
    """Every rank waits for the slowest; where its own steps name a cause, that cause's advice is the change,
    else what makes it slow (its compute) is."""
    job, v = ev.verdict.straggler, ev.verdict
    if job and v.bound == "straggler":
        figures = {k: getattr(job, k) for k in _STRAGGLER_FACTS}
        yield Finding(FindingKind.BALANCE_RANKS, level=v.level, cause="straggler", figures=figures)


def pageable_copies(ev: AdviceEvidence) -> Iterator[Finding]:
    """pin_memory set, yet copies from pageable memory: a tensor made in the loop or a batch type without
    pin_memory(). Otherwise pinning is certain and cheap to fix, whatever its share."""
    if not ev.caller.pageable_h2d_bytes_per_step:
        return
    kind = FindingKind.PAGEABLE_DESPITE_PIN if ev.loader.pin_memory is True else FindingKind.PIN_MEMORY
    figures = {
        "pageable_bytes": ev.caller.pageable_h2d_bytes_per_step,
        "pageable_ms": ev.caller.pageable_h2d_ms_per_step,
        "loader": loader_facts(ev.loader),
    }
    yield Finding(
        kind,
        cause="transfer",
        figures=figures,
        site=Site.parse(ev.loader.site),
        test="perfcore transfer --batch-shape ...",
    )


def _cause_figures(ev: AdviceEvidence, c: Cause) -> dict[str, Any]:
    """What every cause's advice says it gains: removing the cause (the cause's evidence is the verdict's)."""
    v = ev.verdict
    cause_facts = {
        "label": c.label,
        "ms_per_step": c.ms_per_step,
        "share": c.share,
        "share_band": list(c.share_band) if c.share_band else None,
        "step_ms": v.step_ms,
        "on_gpu": ev.run.on_gpu,
        "measured_by": v.measured_by.get(c.label),
    }
    return {"cause_gain": _gain_facts(c.gain), "cause_facts": cause_facts}


def _load(ev: AdviceEvidence, c: Cause) -> Finding:
    """The loader plan's advice where there is a plan, sized by what the free cores allow; else more workers."""
    base, p, step = _cause_figures(ev, c), ev.plan, ev.verdict.step_ms
    if p is None:
        persistent = bool(ev.loader.num_workers and not ev.loader.persistent_workers)
        figures = {**base, "loader": loader_facts(ev.loader), "persistent_workers": persistent}
        return Finding(
            FindingKind.MORE_WORKERS, c.level, "load", figures, Site.parse(ev.loader.site), c.gain, test=_DIAGNOSE
        )
    kind = _PLAN_ADVICE.get(PlanKind(p.kind), FindingKind.MORE_WORKERS)
    own, figures = c.gain, {**base, "plan": True}  # the cause's whole wait, unless the free cores allow less
    if kind is FindingKind.CHEAPER_BATCHES:
        # What workers can hide is what is left to gain from them; a cheaper batch can save up to the whole
        # wait, which is the bound the verdict's gain gives.
        figures.update(workers_speedup=expected_gain(step, p.achievable_ms or 0.0)["speedup"], decode=p.decode)
    elif p.achievable_ms is not None and p.achievable_ms < c.ms_per_step - 1e-9:
        own = Gain(**expected_gain(step, p.achievable_ms))
        figures["achievable_gain"] = _gain_facts(own)  # what the free cores allow of the cause's
    return Finding(kind, c.level, "load", figures, Site.parse(ev.loader.site), own, dict(p.set), _DIAGNOSE)


def _transfer(ev: AdviceEvidence, c: Cause) -> Finding | None:
    if ev.caller.pageable_h2d_bytes_per_step:  # the pageable copies' advice is the transfer cause's
        return None
    figures = {**_cause_figures(ev, c), "pinned": ev.loader.pin_memory is True, "loader": loader_facts(ev.loader)}
    return Finding(FindingKind.OVERLAP_COPIES, c.level, "transfer", figures, Site.parse(ev.loader.site), c.gain)


def _comm(ev: AdviceEvidence, c: Cause) -> Finding:
    return Finding(FindingKind.OVERLAP_COMM, c.level, "comm", _cause_figures(ev, c), gain=c.gain)


def _host(ev: AdviceEvidence, c: Cause) -> Finding:
    """On a GPU, launch overhead; on a CPU, the loop's own work between steps (a StepTimer user may time it)."""
    kind = FindingKind.HOST_GAPS if ev.zero_code else FindingKind.UNTIMED_HOST_WORK
    kind, test = (FindingKind.LAUNCH_OVERHEAD, _GRAPH) if ev.run.on_gpu else (kind, None)
    figures = {**_cause_figures(ev, c), "compiled": ev.run.compiled}
    return Finding(kind, c.level, "host", figures, gain=c.gain, test=test)


# Each named cause's advice, by its label.
CAUSE_RULES = {
    "load": _load,
    "transfer": _transfer,
    "comm": _comm,
    "host": _host,
}


def cause_advice(ev: AdviceEvidence) -> Iterator[Finding]:
    for c in ev.verdict.named:
        f = CAUSE_RULES[c.label](ev, c)
        if f is not None:
            yield f


def set_num_threads(ev: AdviceEvidence) -> Iterator[Finding]:
    """The script's threads that outnumber the CPUs it may use, with the fix (the verdict already says first
    that they inflate its figures). Cores other processes took at the time are the verdict's caveat, not the
    script's fix."""
    over = ev.verdict.oversubscribed
    if over is not None and over.own:
        figures = {k: getattr(over, k) for k in ("fits", "threads", "source", "cpus", "others_cores")}
        yield Finding(FindingKind.SET_NUM_THREADS, cause="threads", figures=figures)


def evaluation(ev: AdviceEvidence) -> Iterator[Finding]:
    """Evaluation passes that take a tenth of the wall time or more: a measured share of the wall time, said
    before the generic ways to faster compute and start-up's "measure a longer run" (a longer run evaluates as
    often)."""
    e = ev.run.evaluation
    if e is None or e.share_of_wall is None or e.share_of_wall < WARN_SHARE:
        return
    level = Level.CRITICAL if e.share_of_wall >= CRITICAL_SHARE else Level.WARN
    figures = {"share_of_wall": e.share_of_wall, "evaluation": dataclasses.asdict(e)}
    yield Finding(FindingKind.EVALUATION, level=level, cause="evaluation", figures=figures)


def compute_ways(ev: AdviceEvidence) -> list[dict[str, Any]]:
    """What would make a compute-bound step faster, from what the script does, in the order worth trying:
    each {"way": bf16 | bf16_if_supported | compile | optimizer | gpu} with its figures. torch.compile
    only to a script that does not compile; the optimizer's fused or foreach form only where the script
    has an optimizer and that form pays (compute_facts names its class and keyword); bf16 autocast only
    on a GPU that has bf16 (a condition where the run did not record it). Thread counts are not here:
    they are advised only on a measured oversubscription."""
    ways: list[dict[str, Any]] = []
    if ev.run.on_gpu and ev.run.bf16_supported is not False:
        ways.append({"way": "bf16" if ev.run.bf16_supported is True else "bf16_if_supported"})
    if not ev.run.compiled:
        ways.append({"way": "compile"})
    opt = ev.run.compute_facts.optimizer if ev.run.compute_facts is not None else None
    if opt is not None:
        ways.append({"way": "optimizer", "snippet": opt.snippet, "share": opt.share, "keyword": opt.keyword})
    if not ev.run.on_gpu:
        ways.append({"way": "gpu"})
    return ways


def faster_compute(ev: AdviceEvidence) -> Iterator[Finding]:
    """A healthy step that is mostly compute: the ways the script does not take yet."""
    v, ways = ev.verdict, compute_ways(ev)
    if v.healthy and ev.compute_ms >= 0.6 * (v.step_ms or float("inf")) and ways:
        figures = {"on_gpu": ev.run.on_gpu, "compute_ms": ev.compute_ms, "step_ms": v.step_ms, "ways": ways}
        yield Finding(FindingKind.FASTER_COMPUTE, level=Level.MINOR, figures=figures)


def memory(ev: AdviceEvidence) -> Iterator[Finding]:
    yield from ev.memory


def startup(ev: AdviceEvidence) -> Iterator[Finding]:
    su = ev.verdict.startup
    if su and su.dominates:
        yield Finding(FindingKind.STARTUP, cause="startup", figures={"startup": dataclasses.asdict(su)})


# The rules, in the order their findings are said.
RULES = (
    balance_ranks,
    pageable_copies,
    cause_advice,
    set_num_threads,
    evaluation,
    faster_compute,
    memory,
    startup,
)


def advise(ev: AdviceEvidence) -> list[Finding]:
    """The findings every rule makes of the evidence, in the rules' order."""
    return [f for rule in RULES for f in rule(ev)]
