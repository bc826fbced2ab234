"""Processes that trained side by side (Hogwild), said: how many, and each one's own figures, from the
facts analysis.processes keeps. They are training processes of one run, never ranks of a job."""

from __future__ import annotations

from perfcore.analysis.labels import LABELS
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms

__all__ = ["trainers_phrase", "trainer_lines"]


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
