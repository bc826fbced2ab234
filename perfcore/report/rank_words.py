"""A multi-rank run's words: each straggler, each rank that waits for one, and the ranks that left no
results, said from the facts analysis.ranks.merge_ranks keeps."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.run_context import Straggler, Waiting
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms, fmt_share
from perfcore.report.verdict_words import EXCESS_PHRASE

__all__ = ["straggler_sentence", "waiting_sentence", "missing_sentence", "job_problem_words"]


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


def straggler_sentence(s: Straggler) -> str:
    """A straggler: its own work against the other ranks', as a share of its step, and the label of its
    excess over their median."""
    label = str(s.excess_label)
    step = float(s.step_ms or 0.0)
    share = (s.work_ms - s.others_work_ms) / step if step > 0 else 0.0
    return (
        f"rank {s.rank} holds up the job: its own work is {fmt_ms(s.work_ms)}/step against "
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
