"""Advice from findings beside the verdict's ranked causes: a straggler every rank waits for, pageable
copies, torch threads that outnumber the free cores, evaluation passes that take a share of the wall
time. Each is added through the caller's `add` (advice.advise), so every item has one shape."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.units import fmt_ms, fmt_share
from perfcore.analysis.verdict import WARN_SHARE

__all__ = ["first_findings", "threads_finding", "evaluation_advice", "compute_ways"]

# What makes one rank slower than the others, by the label of its excess.
_SLOW_WHY = {
    "compute": "it computes longer per step: uneven shards or sequence lengths, a slower or shared device, or "
    "other processes on its cores",
    "load": "its DataLoader keeps it waiting: more workers or a faster source on its node",
    "transfer": "its copies take longer: pinned memory and non_blocking copies on its node",
    "host": "it spends longer outside the model: logging, metrics or checkpointing done on that rank only",
}


def threads_finding(add, ev: Mapping[str, Any]) -> None:
    """The script's threads that outnumber the CPUs it may use, with the fix: after the causes' own advice
    (the verdict already says first that the threads inflate its figures), before the compute and start-up
    notes. Cores that other processes took at the time are the verdict's caveat, not the script's fix."""
    over = ev.get("oversubscribed")
    if over and over.get("own", True):
        rec = add(
            "set_num_threads",
            "threads",
            f"Call torch.set_num_threads({over['fits']}) at the top of the script (or set OMP_NUM_THREADS="
            f"{over['fits']}): OpenMP threads spin waiting for each other when cores are oversubscribed, "
            "which can make a step many times slower.",
            f"{over['threads']} {'torch' if over['source'] == 'torch' else 'OpenMP'} threads on the "
            f"{over['cpus']} CPU(s) this process may use"
            + (f" (other processes used {over['others_cores']:.1f})" if over["others_cores"] >= 0.05 else ""),
        )
        rec["threads_fit"] = over["fits"]


def first_findings(add, decision: Mapping[str, Any], ev: Mapping[str, Any], at: str, pinned: bool) -> float:
    """The findings said before the causes, as each is certain and cheap to act on: a straggler every rank
    waits for, pageable copies.
    Returns the pageable bytes per step (the transfer cause's advice is theirs when there are some)."""
    job = decision.get("straggler")
    # Every rank waits for the slowest; where its own steps name a cause, that cause's advice is the
    # change, else what makes it slow (its compute) is.
    if job and decision.get("bound") == "straggler":
        add(
            "balance_ranks",
            "straggler",
            f"Even out rank {job['slow_rank']}'s work: {_SLOW_WHY.get(job['excess_label'], job['excess_label'])}. "
            f"The other ranks would stop waiting about {fmt_ms(job['wait_ms'])} per step.",
            f"rank {job['waiting_rank']} waits {fmt_ms(job['wait_ms'])} of a {fmt_ms(job['step_ms'])} step "
            f"({fmt_share(job['wait_share'])}) for rank {job['slow_rank']}, whose {job['excess_label']} is "
            f"{fmt_ms(job['excess_ms'])} per step above the others'",
        )
    pageable = ev.get("pageable_h2d_bytes_per_step", 0)
    if pageable and pinned:  # pin_memory is set, yet copies come from pageable memory
        ms_pg = ev.get("pageable_h2d_ms_per_step", 0.0)
        add(
            "pageable_despite_pin",
            "transfer",
            f"In {at}: pin_memory=True is set, yet copies come from pageable memory: a tensor made in the "
            "loop rather than taken from the batch, or a custom batch type without a pin_memory() method. "
            "Pin that tensor (.pin_memory()) or make it on the device, and copy with "
            ".to(device, non_blocking=True).",
            f"{pageable / 2**20:.1f} MiB per step copied host-to-device from pageable memory"
            + (f", {fmt_ms(ms_pg)} per step" if ms_pg else ""),
            "perfcore transfer --batch-shape ...",
        )
    elif pageable:  # certain and cheap to fix, whatever its share: first
        ms_pg = ev.get("pageable_h2d_ms_per_step", 0.0)
        saving = (
            f" Expected saving: up to {fmt_ms(ms_pg)} per step, the time those copies take now, once they "
            "overlap compute."
            if ms_pg
            else ""
        )
        add(
            "pin_memory",
            "transfer",
            f"In {at}: set pin_memory=True, and copy with .to(device, non_blocking=True): "
            "pageable copies are staged through a bounce buffer and block the host." + saving,
            f"{pageable / 2**20:.1f} MiB per step copied host-to-device from pageable memory"
            + (f", {fmt_ms(ms_pg)} per step" if ms_pg else ""),
            "perfcore transfer --batch-shape ...",
        )
    return pageable


def compute_ways(ev: Mapping[str, Any], *, on_gpu: bool) -> list[tuple[str, str]]:
    """What would make a compute-bound step faster, from what the script does: (short, long) each, in the
    order worth trying. torch.compile only to a script that does not compile; the optimizer's fused or
    foreach form only where the script has an optimizer and that form pays (compute_facts names its
    class and keyword); bf16 autocast only on a GPU that has bf16 (said as a condition where the run did
    not record it). Thread counts are not here: they are advised only on a measured oversubscription."""
    ways: list[tuple[str, str]] = []
    bf16 = ev.get("bf16_supported")
    if on_gpu and bf16 is not False:
        ways.append(
            ("bf16 autocast", "bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16) around forward and loss)")
            if bf16 is True
            else ("bf16 autocast if the GPU has bf16", "bf16 autocast where the GPU has bf16 (Ampere or newer)")
        )
    if not ev.get("compiled"):
        ways.append(("torch.compile", "torch.compile(model)"))
    opt = ev.get("optimizer_fact")
    if isinstance(opt, Mapping):
        ways.append(
            (
                str(opt["snippet"]),
                f"{opt['snippet']} (the optimizer is {fmt_share(float(opt.get('share') or 0.0))} of the step; "
                f"its {opt['keyword']} form runs it in fewer kernels)",
            )
        )
    if not on_gpu:
        ways.append(("a GPU", "a GPU, where this compute would run many times faster"))
    return ways


def evaluation_advice(finding: Any) -> dict[str, Any] | None:
    """Advice on evaluation passes that take a tenth of the wall time or more (the finding of
    attribution.evaluation_finding), or None."""
    ev_find = finding if isinstance(finding, Mapping) else {}
    if not (
        isinstance(ev_find.get("sentence"), str)
        and isinstance(ev_find.get("share_of_wall"), (int, float))
        and ev_find["share_of_wall"] >= WARN_SHARE
    ):
        return None
    return {
        "id": "evaluation",
        "cause": "evaluation",
        "share_of_wall": float(ev_find["share_of_wall"]),
        "evidence": ev_find["sentence"],
        "text": (
            f"Evaluation takes {fmt_share(ev_find['share_of_wall'])} of the wall time: evaluate less often "
            "or on fewer batches, under torch.inference_mode(), with a larger batch size than training"
        ),
    }
