"""How the script ended: its exit code, the signal that killed it, the OOM killer (report.words.runs says it),
and which rank failed first."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfcore.analysis.labels import LABELS
from perfcore.run.protocol import PARTS

if TYPE_CHECKING:  # the parent reaches the script's start without numpy, which the typed model brings
    from perfcore.analysis.process_part import Part
    from perfcore.analysis.run_context import Exit

__all__ = [
    "oom_kills",
    "describe_exit",
    "STEP_HEADER",
    "before_first_step",
    "first_failed_rank",
    "training_first",
    "results_lost",
    "results_unfinished",
]

# steps.csv of a run that saw no step: the columns, no rows.
STEP_HEADER = "step,wall_ms," + ",".join(f"{lb}_ms" for lb in LABELS) + ",warmup\n"


def oom_kills() -> int | None:
    """The kernel's count of OOM kills in this cgroup (v2 memory.events, else v1), or None."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            for line in Path(path).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return None


def describe_exit(
    rc: int, child_reason: str | None, oom_before: int | None = None, oom_after: int | None = None
) -> dict[str, Any]:
    """{"code", "reason", "signal"} for the script's end as `perfcore run` saw it (rc: 128+N for death by
    signal N, as a shell reports it); report.words.runs says it."""
    out: dict[str, Any] = {"code": rc, "reason": child_reason or ("finished" if rc == 0 else "exited"), "signal": None}
    if rc == 0 or child_reason in ("steps reached", "interrupted", "terminated", "crashed"):
        return out  # the script's own word for how it ended
    out["reason"] = "exited"
    if rc > 128:
        from perfcore.report.words.runs import signal_name

        out["signal"] = signal_name(rc - 128)
        out["reason"] = "killed"
        if rc - 128 == signal.SIGKILL and oom_before is not None and oom_after is not None and oom_after > oom_before:
            out["reason"] = "out of memory"
    return out


def before_first_step(rc: int, exit: Exit) -> str:
    """One line for a script that failed before anything looked like a step: no step-source advice,
    which cannot help it. Exit 2 is a usage error by convention: argparse's message is quoted, and
    the words say it is the script's own, not perfcore's."""
    if rc == 2:
        usage = exit.usage_error
        return "the script exited 2 before its first step (its own usage error: " + (
            f"{usage})" if usage else "exit 2 by convention; its message is above)"
        )
    exc = (exit.exception or "").strip()
    if exit.reason == "interrupted":
        return f"the script was interrupted (Ctrl-C, exit {rc}) before its first step"
    if exc:  # its own error, not where perfcore looks for steps, is what the user needs
        return f"the script crashed before its first step (exit {rc}): {exc}"
    return f"the script exited {rc} before its first step"


def results_lost(rc: int, lost: dict[str, Any], out: Path) -> str:
    """One line for a run whose script saw steps (or began writing them) but left no results perfcore could
    read: a full disk, a kill while its part was written. Never "before its first step", which it was not,
    and the folder keeps what was written (folder.mark_failed leaves it unmarked)."""
    n = lost["steps"]
    after = f" after {n} steps" if n else ""
    why = (
        f" (the disk holding {out} is full)"
        if lost["disk_full"]
        else f" ({', '.join(f'{PARTS}/{k}' for k in lost['cut_short'])} cut short while written)"
        if lost["cut_short"]
        else ""
    )
    fix = "free space and run it again" if lost["disk_full"] else "run it again"
    return (
        f"the script {_ended(rc)}{after}, but its results could not be "
        f"written{why}; "
        f"what was written stays in {out}: {fix}"
    )


def _ended(rc: int) -> str:
    """How the script ended, said from its exit code alone. Its imports wait for a failure: the parent reaches
    the script's start without numpy (the typed model brings it)."""
    from perfcore.analysis.run_context import Outcome
    from perfcore.report.words.runs import outcome_sentence

    return outcome_sentence(Outcome(**describe_exit(rc, None)))


def results_unfinished(rc: int, path: Path, why: str, out: Path) -> str:
    """One line for a run whose parts were written but whose folder could not be finished (the disk filled
    while perfcore wrote the run's files): the parts stay, and `perfcore report` finishes them later."""
    return (
        f"the script {_ended(rc)}, but its run folder could not be finished: "
        f"cannot write "
        f"{path}: {why}; its recorded steps stay in {out}: free space, then `perfcore report {out}` finishes it"
    )


def first_failed_rank(parts: list[Part]) -> Part | None:
    """The rank whose uncaught exception came first (None when no rank raised one)."""
    failed = [p for p in parts if p.rank is not None and p.exit.exception and p.exit.t_exception_ns is not None]
    return min(failed, key=lambda p: p.exit.t_exception_ns, default=None)


def training_first(measured: list[Part]) -> tuple[list[Part], list[Part]]:
    """The processes that train (optimizer or backward steps) and those that only evaluated (a
    Hogwild parent's test pass: forward steps), when some of each ran; else all, and none."""
    training = [p for p in measured if p.step_source in ("optimizer", "backward")]
    if not training or len(training) == len(measured):
        return measured, []
    return training, [p for p in measured if p not in training]
