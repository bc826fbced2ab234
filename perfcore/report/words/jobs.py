"""A run of several processes in words: a multi-rank run's stragglers, the ranks that wait for one and
those that left no results (analysis.ranks.merge_ranks' facts); for a job across machines, each node (its
ranks, step and what it waits for), the slow node, and how the hosts' clocks were put on one; and
processes that trained side by side (Hogwild, analysis.processes), which are training processes of one
run, never ranks of a job."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.labels import LABELS
from perfcore.analysis.nodes import Alignment, ClockSource, JobNodes, NodeFigures, NodeState
from perfcore.analysis.run_context import Straggler, Waiting
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms, fmt_share
from perfcore.report.words import EXCESS_PHRASE

__all__ = [
    "straggler_sentence",
    "waiting_sentence",
    "missing_sentence",
    "job_problem_words",
    "ranks_phrase",
    "node_sentence",
    "node_sentences",
    "nodes_brief",
    "clock_sentence",
    "trainers_phrase",
    "trainer_lines",
]


def _who(parts: Any) -> str:
    return ", ".join(f"host {h} pid {p}" for h, p in parts)


def job_problem_words(p: Mapping[str, Any]) -> str:
    """Why parts cannot be merged as one job (analysis.ranks.job_problem's reason and figures), and what to do."""
    if p["reason"] == "rank_claimed_twice":
        return (
            f"two parts claim rank {p['rank']} ({_who(p['parts'])}): "
            "they come from different runs, not one job; merge the folders of one job's nodes"
        )
    if p["reason"] == "no_rank":
        return (
            f"{p['count']} part(s) have no rank ({_who(p['parts'])}): each is a single-process run, not a rank of "
            "one distributed job; merge only the folders of one job's nodes, and read a run alone with perfcore report"
        )
    return f"the parts disagree on the job's size (world sizes {p['sizes']}): they are not one job"


def straggler_sentence(s: Straggler, on_hosts: bool = False) -> str:
    """A straggler: its own work against the other ranks', as a share of its step, and the label of its
    excess over their median; on_hosts: the job ran on several hosts, and the straggler's is named."""
    label = str(s.excess_label)
    step = float(s.step_ms or 0.0)
    share = (s.work_ms - s.others_work_ms) / step if step > 0 else 0.0
    where = f" on {s.host}" if s.host and on_hosts else ""
    return (
        f"rank {s.rank}{where} holds up the job: its own work is {fmt_ms(s.work_ms)}/step against "
        f"{fmt_ms(s.others_work_ms)} on the other ranks ({fmt_share(share)} of each step); its excess is "
        f"{label}: {EXCESS_PHRASE.get(label, label)} {fmt_ms(s.excess_ms)}/step more than the median of "
        "the other ranks"
    )


def waiting_sentence(w: Waiting) -> str:
    """A rank that waits in collectives for the stragglers."""
    who = ", ".join(str(r) for r in w.waits_for)
    return f"rank {w.rank} waits {fmt_ms(w.comm_ms)}/step in collectives for rank(s) {who}"


def missing_sentence(r: RunReport) -> str:
    """The ranks of the job that left no results, or "" when none is missing."""
    if not r.missing_ranks:
        return ""
    return (
        f"rank(s) {', '.join(map(str, r.missing_ranks))} of {r.world_size} left no results (crashed or "
        "killed before writing); the report covers the others"
    )


def ranks_phrase(ranks: tuple[int | None, ...]) -> str:
    """Ranks as runs of consecutive numbers: "rank 3", "ranks 0-7", "ranks 0-3, 8, 10-11"."""
    nums = sorted(r for r in ranks if r is not None)
    runs: list[list[int]] = []
    for r in nums:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    said = ", ".join(str(g[0]) if len(g) == 1 else f"{g[0]}-{g[-1]}" for g in runs)
    return f"rank {said}" if len(nums) == 1 else f"ranks {said}" if nums else "no numbered rank"


def node_sentence(n: NodeFigures, job: JobNodes) -> str:
    """One node of the job: the slow node with its cause, a node that waits for it (said as waiting, not as
    slow: its own work is shorter, its collectives longer), or an even one."""
    head = f"{n.host} ({ranks_phrase(n.ranks)})"
    s = job.slow_node
    if n.state is NodeState.SLOW and s is not None:
        return (
            f"{head} is the slow node: its ranks' own work is {fmt_ms(s.work_ms)}/step against "
            f"{fmt_ms(s.others_work_ms)} on the other nodes, the slowest in {fmt_share(s.slowest_share)} of the "
            f"steps; its excess is {s.excess_label}: {EXCESS_PHRASE.get(s.excess_label, s.excess_label)} "
            f"{fmt_ms(s.excess_ms)}/step more; rank {s.rank} works longest"
        )
    comm = n.breakdown_ms.get("comm", 0.0)
    if n.state is NodeState.WAITING:
        return (
            f"{head} waits for {', '.join(n.waits_for)}: {fmt_ms(comm)} of each {fmt_ms(n.step_ms)} step in "
            f"collectives ({fmt_share(n.breakdown_fraction.get('comm', 0.0))}); its own work is "
            f"{fmt_ms(n.work_ms)}/step"
        )
    return f"{head}: {fmt_ms(n.step_ms)}/step, its own work {fmt_ms(n.work_ms)}, {fmt_ms(comm)} in collectives"


# Past this many nodes that wait alike, one line says them all.
_NODE_LINES = 3


def _span(values: list[float], fmt: Any) -> str:
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo} to {hi}"


def node_sentences(job: JobNodes) -> list[str]:
    """Each node said, the waiting ones together when there are more than _NODE_LINES of them."""
    waiting = [n for n in job.nodes if n.state is NodeState.WAITING]
    if len(waiting) <= _NODE_LINES:
        return [node_sentence(n, job) for n in job.nodes]
    comm = [n.breakdown_ms.get("comm", 0.0) for n in waiting]
    share = [n.breakdown_fraction.get("comm", 0.0) for n in waiting]
    together = (
        f"{len(waiting)} nodes ({ranks_phrase(tuple(r for n in waiting for r in n.ranks))}) wait for "
        f"{', '.join(waiting[0].waits_for)}: {_span(comm, fmt_ms)} of each step in collectives "
        f"({_span(share, fmt_share)})"
    )
    return [node_sentence(n, job) for n in job.nodes if n.state is not NodeState.WAITING] + [together]


def nodes_brief(job: JobNodes) -> str:
    """The job's nodes in one line (the brief report's): the slow node, its rank and cause, and who waits
    for it; or that no node holds the others up."""
    s = job.slow_node
    if s is None:
        return (
            f"nodes: {len(job.nodes)}, none holds the others up ("
            + "; ".join(f"{n.host} {ranks_phrase(n.ranks)}" for n in job.nodes)
            + ")"
        )
    slow = next(n for n in job.nodes if n.host == s.host)
    waiting = [n for n in job.nodes if n.state is NodeState.WAITING]
    line = (
        f"nodes: {s.host} ({ranks_phrase(slow.ranks)}) is slow, rank {s.rank} most: "
        f"{EXCESS_PHRASE.get(s.excess_label, s.excess_label)} {fmt_ms(s.excess_ms)}/step more than the other nodes"
    )
    if len(waiting) == 1:
        w = waiting[0]
        line += f"; {w.host} ({ranks_phrase(w.ranks)}) waits for it {fmt_ms(w.breakdown_ms.get('comm', 0.0))}/step"
    elif waiting:
        line += f"; {len(waiting)} nodes wait for it, {s.waiting_host} longest ({fmt_ms(s.wait_ms)}/step)"
    return line


def clock_sentence(al: Alignment) -> str:
    """How the hosts' clocks were put on the reference host's, with the uncertainty of each offset and how
    closely one step's collectives end across the hosts after it."""
    said = []
    for h in al.hosts:
        if h.source is ClockSource.REFERENCE:
            continue
        if h.source is ClockSource.NONE:
            said.append(f"{h.host} left on its own clock (no step in common)")
            continue
        by = "collectives" if h.source is ClockSource.COLLECTIVES else "step ends (no collective kept)"
        said.append(
            f"{h.host} {h.offset_ns / 1e9:+.6f} s by its {by} over {h.steps} steps "
            f"(spread {fmt_ms(h.spread_ns / 1e6)}, offset within ±{fmt_ms(h.error_ns / 1e6)})"
        )
    aligned = [h for h in al.hosts if h.source in (ClockSource.COLLECTIVES, ClockSource.STEP_ENDS)]
    if len(aligned) > _NODE_LINES:  # many hosts: their offsets are run.json's, their worst uncertainty said
        said = [
            f"{len(aligned)} hosts by their collectives or step ends (spread up to "
            f"{fmt_ms(max(h.spread_ns for h in aligned) / 1e6)}, offsets within "
            f"±{fmt_ms(max(h.error_ns for h in aligned) / 1e6)})"
        ] + [x for x in said if "own clock" in x]
    line = f"clocks: on {al.reference}'s; " + "; ".join(said)
    if al.residual_ns is not None:
        line += (
            f"; one step's collectives then end within {fmt_ms(al.residual_ns / 1e6)} across the hosts "
            f"(p90 {fmt_ms((al.residual_p90_ns or 0) / 1e6)}, {al.residual_steps} steps)"
        )
    return line


def trainers_phrase(r: RunReport) -> str:
    """ " in 2 training processes" where several trained side by side, else ""."""
    n = len(r.trainers)
    return f" in {n} training processes" if n > 1 else ""


def trainer_lines(r: RunReport) -> list[str]:
    """Each training process's steps, mean step and labels (ms/step), as the terminal's table."""
    rows = r.trainers
    if len(rows) < 2:
        return []
    out = ["", f"  {'process':<12} {'steps':>6} {'step':>9} " + " ".join(f"{lb:>9}" for lb in LABELS)]
    for p in rows:
        out.append(
            f"  {'pid ' + str(p.pid):<12} {p.steps!s:>6} {fmt_ms(p.step_time_ms.mean):>9} "
            + " ".join(f"{fmt_ms(p.breakdown_ms[lb]):>9}" for lb in LABELS)
        )
    return out
