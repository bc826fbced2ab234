"""Advice from findings beside the verdict's ranked causes: a straggler every rank waits for, pageable
copies, torch threads that outnumber the free cores, evaluation passes that take a share of the wall
time. Each is added through the caller's `add` (advice.advise), so every item has one shape: facts,
which report.words.advice puts into words."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.findings import Finding, FindingKind
from perfcore.analysis.results import Level, Verdict
from perfcore.analysis.verdict import CRITICAL_SHARE, WARN_SHARE

__all__ = ["first_findings", "threads_finding", "evaluation_advice", "compute_ways"]

# The straggler's figures the advice is made from.
_STRAGGLER_FACTS = ("slow_rank", "waiting_rank", "excess_label", "excess_ms", "wait_ms", "wait_share", "step_ms")


def threads_finding(add, ev: Mapping[str, Any]) -> None:
    """The script's threads that outnumber the CPUs it may use, with the fix: after the causes' own advice
    (the verdict already says first that the threads inflate its figures), before the compute and start-up
    notes. Cores that other processes took at the time are the verdict's caveat, not the script's fix."""
    over = ev.get("oversubscribed")
    if over and over.get("own", True):
        facts = {k: over[k] for k in ("fits", "threads", "source", "cpus", "others_cores") if k in over}
        add("set_num_threads", "threads", facts)


def first_findings(add, decision: Verdict, ev: Mapping[str, Any], loader: Mapping[str, Any]) -> float:
    """The findings said before the causes, as each is certain and cheap to act on: a straggler every rank
    waits for, pageable copies. loader: the DataLoader's facts (loader_plan.loader_facts).
    Returns the pageable bytes per step (the transfer cause's advice is theirs when there are some)."""
    job = decision.straggler
    # Every rank waits for the slowest; where its own steps name a cause, that cause's advice is the
    # change, else what makes it slow (its compute) is.
    if job and decision.bound == "straggler":
        figures = {k: getattr(job, k) for k in _STRAGGLER_FACTS}
        add("balance_ranks", "straggler", figures, level=decision.level)
    pageable = ev.get("pageable_h2d_bytes_per_step", 0)
    if pageable:
        # pin_memory set, yet copies from pageable memory: a tensor made in the loop or a batch type
        # without pin_memory(). Otherwise pinning is certain and cheap to fix, whatever its share: first.
        rid = "pageable_despite_pin" if loader.get("pin_memory") is True else "pin_memory"
        facts = {"pageable_bytes": pageable, "pageable_ms": ev.get("pageable_h2d_ms_per_step", 0.0), "loader": loader}
        add(rid, "transfer", facts, "perfcore transfer --batch-shape ...")
    return pageable


def compute_ways(ev: Mapping[str, Any], *, on_gpu: bool) -> list[dict[str, Any]]:
    """What would make a compute-bound step faster, from what the script does, in the order worth trying:
    each {"way": bf16 | bf16_if_supported | compile | optimizer | gpu} with its figures. torch.compile
    only to a script that does not compile; the optimizer's fused or foreach form only where the script
    has an optimizer and that form pays (compute_facts names its class and keyword); bf16 autocast only
    on a GPU that has bf16 (a condition where the run did not record it). Thread counts are not here:
    they are advised only on a measured oversubscription."""
    ways: list[dict[str, Any]] = []
    bf16 = ev.get("bf16_supported")
    if on_gpu and bf16 is not False:
        ways.append({"way": "bf16" if bf16 is True else "bf16_if_supported"})
    if not ev.get("compiled"):
        ways.append({"way": "compile"})
    opt = ev.get("optimizer_fact")
    if isinstance(opt, Mapping):
        ways.append(
            {
                "way": "optimizer",
                "snippet": str(opt["snippet"]),
                "share": float(opt.get("share") or 0.0),
                "keyword": opt["keyword"],
            }
        )
    if not on_gpu:
        ways.append({"way": "gpu"})
    return ways


def evaluation_advice(finding: Any) -> Finding | None:
    """Advice on evaluation passes that take a tenth of the wall time or more (the finding of
    attribution.evaluation_finding), or None. Its evidence is the finding itself."""
    ev_find = finding if isinstance(finding, Mapping) else {}
    share = ev_find.get("share_of_wall")
    if not (isinstance(share, (int, float)) and not isinstance(share, bool) and share >= WARN_SHARE):
        return None
    level = Level.CRITICAL if share >= CRITICAL_SHARE else Level.WARN
    figures = {"share_of_wall": float(share), "evaluation": dict(ev_find)}
    return Finding(FindingKind.EVALUATION, level=level, cause="evaluation", figures=figures)
