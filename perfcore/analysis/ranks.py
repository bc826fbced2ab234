"""Multi-rank runs: per-rank results merged, steps aligned by index, stragglers named (pure functions).

In synchronous data parallelism every rank's step takes the same wall time: the slow rank is the
one whose own work (wall minus comm) is longest, and the others show its excess as comm, waiting
in the collective. Clocks of one host are one clock; across hosts an offset per host is estimated
from when the collectives end (they end together on every rank: analysis.nodes), and the job is also
seen per node.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from perfcore.analysis.labels import LABELS
from perfcore.analysis.codec import to_doc
from perfcore.analysis.nodes import Alignment, RankSteps, align_clocks, job_nodes, rank_events, slow_rows
from perfcore.analysis.process_part import Part
from perfcore.analysis.results import Level, Straggle, Verdict
from perfcore.analysis.run_context import RankRow, Straggler, Waiting
from perfcore.analysis.verdict import AVOIDABLE, CRITICAL_SHARE, WARN_SHARE

__all__ = ["merge_ranks", "clock_alignment", "clock_offsets", "job_problem", "straggle", "judge_straggle"]


def _measured(steps: pd.DataFrame) -> pd.DataFrame:
    return steps[~steps["warmup"].astype(bool)].reset_index(drop=True)


def _rank_steps(part: Part, measured: pd.DataFrame) -> RankSteps:
    return RankSteps(
        host=str(part.host),
        rank=part.rank,
        wall_ms=measured["wall_ms"].to_numpy(),
        label_ms={lb: measured[f"{lb}_ms"].to_numpy() for lb in LABELS},
    )


def merge_ranks(parts: list[Part], node_view: bool = False) -> dict[str, Any]:
    """parts: the ranks' parts (a rank's run.json, its steps table and trace arrays). Returns the
    fields the merged perfcore.run/1 document adds, as facts (report.words.runs says them): ranks, stragglers
    (each with its own work against the others' and the label of its excess), waiting (the ranks that
    wait in collectives for them), missing_ranks, world_size; with ranks on more than one host, also
    `clocks` (how each host's clock was put on the job's) and `nodes` (the job per node, the slow node).
    node_view: the parts are one node's of a larger job: no rank is missing from them."""
    parts = sorted(parts, key=lambda p: p.rank or 0)
    world = max([p.world_size or 0 for p in parts] + [len(parts)])
    # Only a distributed job has ranks to miss; processes without a rank (rank None) never do.
    numbered = [p.rank for p in parts if p.rank is not None]
    # One node's view of a job across machines misses no rank: the job's report says which are missing.
    missing = sorted(set(range(world)) - set(numbered)) if numbered and not node_view else []
    ranks = [{"rank": p.rank, **p.figures(), "host": p.host} for p in parts]
    out: dict[str, Any] = {"world_size": world, "ranks": ranks, "missing_ranks": missing, "stragglers": []}
    tables = [_measured(p.table) for p in parts]
    k = min((len(t) for t in tables), default=0)
    nodes = None
    if len({p.host for p in parts}) > 1:
        out["clocks"] = to_doc(clock_alignment(parts))
        nodes = job_nodes([_rank_steps(p, t) for p, t in zip(parts, tables)])
        out["nodes"] = to_doc(nodes)
    if len(parts) < 2 or k == 0:
        return out
    label_means = {lb: np.array([t[f"{lb}_ms"].to_numpy()[:k].mean() for t in tables]) for lb in LABELS}
    out["stragglers"] = _stragglers(parts, tables, k, label_means)
    slow = nodes.slow_node if nodes is not None else None
    if slow is not None and slow.rank not in {s["rank"] for s in out["stragglers"]}:
        # A whole node slower than the others: its ranks share the excess, none is the slowest on most steps
        # alone; the node's rank with the most own work stands for it.
        i = next(i for i, p in enumerate(parts) if p.rank == slow.rank)
        work = (tables[i]["wall_ms"] - tables[i]["comm_ms"]).to_numpy()[:k]
        out["stragglers"].append(
            {
                "rank": slow.rank,
                "excess_label": slow.excess_label,
                "excess_ms": slow.excess_ms,
                "slowest_share": slow.slowest_share,
                "work_ms": float(work.mean()),
                "others_work_ms": slow.others_work_ms,
                "step_ms": float(tables[i]["wall_ms"].to_numpy()[:k].mean()),
                "host": slow.host,
            }
        )
    if out["stragglers"]:
        out["stragglers"].sort(key=lambda s: -s["work_ms"])  # the first holds the job up most (finish's focus)
        out["waiting"] = _waiting(parts, tables, k, label_means, {s["rank"] for s in out["stragglers"]})
    return out


def _stragglers(
    parts: list[Part], tables: list[pd.DataFrame], k: int, label_means: Mapping[str, np.ndarray]
) -> list[dict[str, Any]]:
    """The ranks the others wait for (analysis.nodes.slow_rows), each with the label of its excess over the
    others' median."""
    work = np.stack([(t["wall_ms"] - t["comm_ms"]).to_numpy()[:k] for t in tables])  # ranks x steps
    found = []
    for i, slow in slow_rows(work, label_means).items():
        step_ms = float(np.mean(tables[i]["wall_ms"].to_numpy()[:k]))
        found.append({"rank": parts[i].rank, **slow, "step_ms": step_ms, "host": parts[i].host})
    return found


def _waiting(
    parts: list[Part],
    tables: list[pd.DataFrame],
    k: int,
    label_means: Mapping[str, np.ndarray],
    slow: set[Any],
) -> list[dict[str, Any]]:
    """The ranks that spend 0.5 ms a step longer in collectives than the slow ranks do: they wait for them."""
    slow_idx = [i for i, p in enumerate(parts) if p.rank in slow]
    slow_comm = max(label_means["comm"][i] for i in slow_idx)
    return [
        {
            "rank": parts[i].rank,
            "comm_ms": float(label_means["comm"][i]),
            "step_ms": float(tables[i]["wall_ms"].to_numpy()[:k].mean()),
            "waits_for": sorted(slow, key=str),
        }
        for i in range(len(parts))
        if i not in slow_idx and label_means["comm"][i] - slow_comm > 0.5
    ]


def straggle(
    stragglers: Sequence[Straggler], waiting: Sequence[Waiting], ranks: Sequence[RankRow] = ()
) -> Straggle | None:
    """The job's straggle from merge_ranks' fields (stragglers, waiting, as the run model reads them): the
    longest wait for the slowest straggler, or None when no rank is a straggler or none waits for it."""
    waits = [w for w in waiting if w.step_ms]
    if not stragglers or not waits:
        return None
    s = max(stragglers, key=lambda x: x.work_ms)
    w = max(waits, key=lambda x: x.comm_ms / x.step_ms)
    host = {r.rank: r.host for r in ranks}
    return Straggle(
        waiting_rank=w.rank,
        wait_ms=w.comm_ms,
        step_ms=w.step_ms,
        slow_rank=s.rank,
        excess_label=str(s.excess_label),
        excess_ms=s.excess_ms,
        work_ms=s.work_ms,
        others_work_ms=s.others_work_ms,
        slow_host=host.get(s.rank),
        waiting_host=host.get(w.rank),
    )


_OWN_CAUSES = tuple(lb for lb in AVOIDABLE if lb != "comm")


def judge_straggle(decision: Verdict, s: Straggle | None) -> Verdict:
    """The job's verdict from the slow rank's own (`decision`) and the straggle: when a rank waits for the
    straggler at or above the warn tier, it keeps the straggle (whose words name that wait first), with the slow rank and why it
    is slow; and where the slow rank's own verdict is healthy (its excess is compute), the wait is the
    bound. Otherwise the decision as it was."""
    if s is None or not decision.step_ms:
        return decision
    share = s.wait_share
    if share < WARN_SHARE:
        return decision
    out = dataclasses.replace(decision, straggler=s)
    level = Level.CRITICAL if share >= CRITICAL_SHARE else Level.WARN
    # The slow rank's own cause is the job's bound when it surely names one that makes it slow; its comm
    # (the collective itself), a borderline cause or healthy compute leave the wait as the bound.
    if not (decision.healthy is False and decision.bound in _OWN_CAUSES):
        out = dataclasses.replace(out, bound="straggler", level=level, healthy=False, primary=None)
    return out  # report.words.verdict leads with the straggler before the slow rank's verdict


def job_problem(parts: list[Part]) -> dict[str, Any] | None:
    """Why these parts cannot be the ranks of one job, or None, as a reason and its figures
    (report.words.runs.job_problem_words says it): two parts claiming one rank from different runs
    (two jobs' folders merged: rank_claimed_twice, with the two (host, pid)), processes without a rank
    that stepped beside others (no_rank, with up to 3 of them), or ranks that disagree on the job's size
    (world_sizes)."""
    seen: dict[int, tuple] = {}
    for p in parts:
        if p.rank is None:
            continue
        who = (p.host, p.pid)
        if p.rank in seen and seen[p.rank] != who:
            return {"reason": "rank_claimed_twice", "rank": p.rank, "parts": [list(seen[p.rank]), list(who)]}
        seen[p.rank] = who
    # A process without a rank is a run of its own (its own subprocesses aside): two of them, or one
    # beside ranks, are separate runs. One that saw no step is no run: a launcher (torchrun's agent on
    # each node) that imported torch to start the ranks.
    runs = [p for p in parts if p.stepped]
    single = [p for p in runs if p.rank is None and p.nested_in is None]
    if single and len(runs) - sum(p.nested_in is not None for p in runs) > 1:
        who = [[p.host, p.pid] for p in single[:3]]
        return {"reason": "no_rank", "count": len(single), "parts": who}
    sizes = {p.world_size for p in parts if p.world_size}
    if len(sizes) > 1:
        return {"reason": "world_sizes", "sizes": sorted(sizes)}
    return None


def clock_alignment(parts: list[Part]) -> Alignment:
    """The hosts' clocks put on the clock of the lowest rank's host (analysis.nodes.align_clocks), from
    the collectives every part kept in its trace arrays (`raw`)."""
    return align_clocks([rank_events(p.raw, str(p.host), p.rank) for p in parts])


def clock_offsets(parts: list[Part]) -> dict[str, int]:
    """Per host, ns to add to its timestamps to put them on the lowest rank's host's clock. Same host: 0."""
    return clock_alignment(parts).offsets
