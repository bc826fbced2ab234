"""Run folders finished from parts perfcore did not finish as they were written: a folder whose perfcore was
stopped first (`perfcore report` finishes it afterwards), and the folders of a job's nodes joined into one
(`perfcore merge`)."""

from __future__ import annotations

from pathlib import Path

from perfcore.analysis.run_report import RunReport
from perfcore.errors import UsageError
from perfcore.run.parent.finish import finish_run, read_parts
from perfcore.run.parent.folder import prepare_out
from perfcore.run.parent.part_dirs import copy_workers

__all__ = ["finish_unfinished", "merge_dirs"]


# How a part says its process ended -> the exit code a shell would have shown for it.
_CODE_OF = {"finished": 0, "steps reached": 0, "interrupted": 130, "terminated": 143, "crashed": 1}


def finish_unfinished(out: Path) -> RunReport:
    """A run folder perfcore was stopped before finishing (perfcore itself killed, its terminal
    closed, Ctrl-C while it wrote, a full disk): run.json and the rest, made from the parts and
    checkpoints its processes wrote, as `perfcore run` would have. The script's exit code was never
    seen, so the one its part reports stands in for it, and a note says so."""
    from perfcore.errors import BadResultFile
    from perfcore.run.parent.folder import drop_dead_settings, is_run_folder, live_run

    out = Path(out)
    alive = live_run(out)
    if alive:
        # Its run writes the results itself when it ends; finishing now would report it as killed.
        raise BadResultFile(
            out,
            f"belongs to a run that is still going ({alive} is alive); nothing was written",
            "wait for it to end, it finishes the folder itself (or stop it, then run perfcore report again)",
            exit_code=1,
        )
    drop_dead_settings(out)  # what its killed perfcore could not remove, where the folder proves it is its own
    parts = read_parts(out)
    if not parts:
        if is_run_folder(out):
            raise BadResultFile(
                out,
                "is a perfcore run folder, but its script left no results in it (killed "
                "before perfcore could write any, or it never reached torch)",
                "run the script again",
                exit_code=1,
            )
        raise BadResultFile(out, "is not a perfcore run folder (no run.json)", exit_code=2)
    first = parts[0]
    rc = _CODE_OF.get(first.exit.reason, 1) if first.checkpoint is None else 137
    return finish_run(out, rc, list(first.run_command), parts, scope="afterwards")


def merge_dirs(dirs: list[Path], out: Path | None) -> tuple[RunReport, Path]:
    """`perfcore merge`: parts written on several nodes of one job -> one run folder (the run, its folder)."""
    parts, seen = [], set()
    for d in dirs:
        found = read_parts(Path(d))
        if not found:
            raise UsageError(f"{d} holds no perfcore parts (parts/rank*/run.json)")
        for p in found:
            key = (p.rank, p.host, p.pid)
            if key not in seen:
                seen.add(key)
                parts.append(p)
    from perfcore.analysis.ranks import job_problem

    problem = job_problem(parts)
    if problem:
        from perfcore.report.words.runs import job_problem_words

        raise UsageError(job_problem_words(problem))
    out = prepare_out(out, "merge")  # only now: a refused merge leaves no folder behind
    copy_workers([Path(d) for d in dirs], out)  # the nodes' DataLoader figures, as each node's folder had them
    return finish_run(out, 0, list(parts[0].run_command), parts), out
