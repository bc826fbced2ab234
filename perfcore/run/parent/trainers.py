"""Which processes are the run: the job's own (its ranks, or the script's one process), or, where the
script's process only started others that train side by side (Hogwild), all of those together, merged."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfcore.analysis.process_part import Part

__all__ = ["the_run", "together"]


def _trains_side_by_side(started: list[Part], evaluating: list[Part]) -> bool:
    """Processes the script started that all train while it trains nothing: multiprocessing's (its own
    word for them) or, from a part written before that was kept, any beside a parent that only evaluated.
    None of them waited in a collective: processes that did (DDP started by mp.spawn, its ranks known to
    torch.distributed only) are one job's ranks, whose steps are the same iterations, not to be summed."""
    by_mp = all(p.started_by == "multiprocessing" for p in started)
    alone = all(not p.comm_ms for p in started)
    return len(started) > 1 and alone and (by_mp or bool(evaluating))


def the_run(parts: list[Part]) -> tuple[list[Part], list[Part], list[Part], bool]:
    """(the processes whose steps are the run, those that only evaluated, those measured apart, whether
    the run's processes train side by side and are merged into one). Pythons the script started itself
    (subprocess, a Pool beside its own loop) are not ranks of one job: the job's own processes are the
    run and those are listed apart; when they hold every step, one is the run, or all of them together
    when they train side by side (torch.multiprocessing, Hogwild)."""
    from perfcore.run.parent.outcome import training_first

    measured, evaluating = training_first([p for p in parts if p.stepped])
    started = [p for p in measured if p.nested_in is not None]
    if started and len(started) < len(measured):
        return [p for p in measured if p.nested_in is None], evaluating, started, False
    if _trains_side_by_side(started, evaluating):
        return started, evaluating, [], True
    if len(started) > 1:
        top = max(started, key=lambda p: p.steps)
        return [top], evaluating, [p for p in started if p is not top], False
    return measured, evaluating, [], False


def together(parts: list[Part], evaluating: list[Part] = ()) -> Part:
    """The trainers as one part: the first one's document with the figures of every trainer's rows (steps
    summed, the table and shares over all of them), the merged table and its step starts; the passes of a
    process that only evaluated (Hogwild's parent testing the model) are the run's evaluation."""
    from perfcore.analysis.process_part import Part
    from perfcore.analysis.processes import SUMMARY_KEYS, evaluation_apart, merge_trainers

    fields, table, raw = merge_trainers(parts)
    first = min(parts, key=lambda p: p.pid or 0)
    doc = {k: v for k, v in first.doc.items() if k not in SUMMARY_KEYS}
    doc.update(fields)
    ev = evaluation_apart(evaluating, [p.table for p in parts])
    if ev and not fields.get("evaluation"):
        doc["evaluation"] = ev
    return Part.parse(doc, table, raw, key="trainers", label="training processes")
