"""The triage stages as the CLI runs them: one function per command that takes a target (a workload
spec or a command), runs the stage and writes its files into the run folder. Results are written as
they come (a sweep after every configuration), atomically, so Ctrl-C or a full disk leaves the
part already finished readable."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcore.errors import UsageError
from perfcore import jsonio

__all__ = ["Target", "parse_target", "is_workload_spec", "health_stage", "diagnose_stage", "sweep_stage", "SCRIPT_GRID"]

# A script's sweep, where the user gives no values: None keeps the script's own setting (read from a
# first short run), so only the axes asked for are replaced; workers 0 and 2 when none is asked.
SCRIPT_GRID = {"batch_size": [None], "num_workers": [0, 2], "pin_memory": [None], "prefetch_factor": [None]}


@dataclass(frozen=True)
class Target:
    """What a triage command measures, checked before any folder is made (a typo leaves nothing): a workload
    (loaded) named by its spec, or a command (checked) to run."""

    spec: Any  # the workload spec (str) or the command (list[str])
    workload: Any = None  # the Workload; None for a command


def is_workload_spec(word: str) -> bool:
    """demo / resnet18 / FILE.py:FUNC / module:func, as opposed to a program to run."""
    from perfcore.workloads import BUILTINS

    return word in BUILTINS or ":" in word or not (shutil.which(word) or os.path.isfile(word))


def parse_target(words: tuple[str, ...] | list[str]) -> Target:
    words = list(words)
    if not words:
        raise UsageError("give a workload (demo, resnet18, FILE.py:FUNCTION) or -- python train.py ...")
    if len(words) == 1 and is_workload_spec(words[0]):
        from perfcore.workloads import load_workload

        return Target(words[0], load_workload(words[0]))
    if is_workload_spec(words[0]) and not os.path.isfile(words[0]):
        raise UsageError(
            f"unexpected {' '.join(words[1:])!r} after the workload {words[0]!r}; "
            "options go before the workload, a command after --"
        )
    from perfcore.run.parent.command import check_command

    check_command(words)
    return Target(words)


def runner_for(target: Target, out: Path):
    """The runner that measures the target: its workload in this process, or its command under
    `perfcore run`, each run in a folder under `out`."""
    if target.workload is None:
        from perfcore.experiments.scripts import ScriptRunner

        return ScriptRunner(target.spec, out)
    from perfcore.experiments.runner import WorkloadRunner

    return WorkloadRunner(target.workload, target.spec)


def health_stage(target: Target, out: Path, *, steps: int, interval_s: float, progress=None):
    """health's result, written as health.json; (result, files)."""
    from perfcore.experiments.health import health

    progress_steps = progress.steps if progress and target.workload is not None else None
    result = health(runner_for(target, out), steps=steps, interval_s=interval_s, progress=progress_steps)
    jsonio.write(out / "health.json", result.to_dict())
    return result, ["health.json"]


def diagnose_stage(target: Target, out: Path, *, steps: int, warmup: int, progress=None):
    """diagnose's result, written as diagnose.json with its plot; (result, files)."""
    from perfcore.experiments.diagnose import diagnose
    from perfcore.report.plots import plot_experiments
    from perfcore.report.words.verdict import verdict_short

    say = progress.stage if progress else None
    result = diagnose(runner_for(target, out), steps=steps, warmup=warmup, progress=say)
    jsonio.write(out / "diagnose.json", result.to_dict())
    plot_experiments(result.experiments, out / "experiments.png", title=verdict_short(result.verdict))
    return result, ["diagnose.json", "experiments.png"]


def sweep_stage(
    target: Target,
    out: Path,
    grid: dict[str, list | None],
    *,
    steps: int,
    warmup: int,
    budget_s: float | None = None,
    resume: bool = False,
    progress=None,
) -> tuple[dict, list]:
    """The sweep, checkpointed to sweep.json after every configuration; resume=True continues the
    configurations an earlier sweep into `out` did not finish."""
    from perfcore.experiments.sweep import default_grid, sweep
    from perfcore.experiments.sweep_results import resume_rows, sweep_doc

    runner = runner_for(target, out)
    base = SCRIPT_GRID if target.workload is None else default_grid(target.workload)
    grid = {k: v if v is not None else base[k] for k, v in grid.items()}
    done = None
    if resume:
        if budget_s is not None:
            raise UsageError("--resume continues a full-grid sweep; it cannot be combined with --budget")
        from perfcore.analysis.reader import load_sweep

        done = resume_rows(load_sweep(out), grid, steps, runner.name)

    def checkpoint(rows: list[dict]) -> None:
        import time

        import pandas as pd

        partial = sweep_doc(
            runner.name, grid, steps, pd.DataFrame(rows), t0=time.perf_counter(), rounds=[], interrupted=True
        )
        jsonio.write(out / "sweep.json", partial.to_dict())

    say = progress.configs if progress else None
    result = sweep(
        runner, grid, steps=steps, warmup=warmup, budget_s=budget_s, progress=say, done=done, on_row=checkpoint
    )
    return result, write_sweep(result.to_dict(), out)


def write_sweep(doc: dict[str, Any], out: Path) -> list[str]:
    """sweep.json (the result's to_dict), sweep.csv and the heatmaps."""
    import pandas as pd

    from perfcore.report.plots import plot_heatmaps

    files = ["sweep.json"]
    jsonio.write(out / "sweep.json", doc)
    table = pd.DataFrame(doc["configs"])
    if len(table):
        jsonio.write_csv(out / "sweep.csv", table)
        files.append("sweep.csv")
        if table["samples_per_s"].notna().any():
            files += [h.name for h in plot_heatmaps(table, out)]
    return files
