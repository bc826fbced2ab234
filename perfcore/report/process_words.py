"""Processes that trained side by side (Hogwild), said: how many, and each one's own figures, from the
facts analysis.processes keeps. They are training processes of one run, never ranks of a job."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.labels import LABELS
from perfcore.analysis.units import fmt_ms

__all__ = ["trainers", "trainers_phrase", "trainer_lines"]


def trainers(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The document's training processes that have their figures (none for a run of one process)."""
    procs = doc.get("processes")
    rows = procs.get("training") if isinstance(procs, Mapping) else None
    if not isinstance(rows, list):
        return []
    return [r for r in rows if isinstance(r, Mapping) and isinstance(r.get("step_time_ms"), Mapping)]


def trainers_phrase(doc: Mapping[str, Any]) -> str:
    """ " in 2 training processes" where several trained side by side, else ""."""
    n = len(trainers(doc))
    return f" in {n} training processes" if n > 1 else ""


def trainer_lines(doc: Mapping[str, Any]) -> list[str]:
    """Each training process's steps, mean step and labels (ms/step), as the terminal's table."""
    rows = trainers(doc)
    if len(rows) < 2:
        return []
    out = ["", f"  {'process':<12} {'steps':>6} {'step':>9} " + " ".join(f"{lb:>9}" for lb in LABELS)]
    for r in rows:
        ms = r.get("breakdown_ms") if isinstance(r.get("breakdown_ms"), Mapping) else {}
        out.append(
            f"  {'pid ' + str(r.get('pid')):<12} {r.get('steps', 0)!s:>6} {fmt_ms(r['step_time_ms'].get('mean')):>9} "
            + " ".join(f"{fmt_ms(ms.get(lb)):>9}" for lb in LABELS)
        )
    return out
