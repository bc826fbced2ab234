"""The staged triage of a workload: health (is the device busy), diagnose (which part is the bottleneck),
sweep (which DataLoader settings), and demo (all of them on the built-in workload)."""

from __future__ import annotations

import functools
import shlex
import sys
from pathlib import Path

import click

from perfcore.cli.shared import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    Duration,
    ListOf,
    Number,
    Results,
    load_target,
    one_line,
    results,
    steps_option,
    target_arg,
    target_command,
    warmup_option,
    with_targets,
)
from perfcore.experiments.measurement import SETTINGS
from perfcore.safe_text import clean

__all__ = ["health_cmd", "diagnose_cmd", "sweep_cmd", "demo_cmd"]


@target_command("health")
@steps_option(100)
@click.option("--interval", type=Duration(), default="100ms", show_default=True, help="Sampling interval.")
@results("health")
@target_arg
@with_targets("run once under perfcore run, stopped after --steps")
def health_cmd(res: Results, steps, interval, target) -> None:
    """Stage 1: is the device busy? 100 iterations of next batch -> forward -> loss.

    Writes health.json and report.html into its folder (--out); with a script, the script's run folder
    inside it.
    """
    from perfcore.experiments.stages import health_stage
    from perfcore.report.stage_text import render_health

    result, files = health_stage(
        load_target(target), res.folder, steps=steps, interval_s=interval, progress=res.progress()
    )
    text = render_health(result)
    res.echo(clean(text))
    res.done_with_report(result, text, files)
    _mirror_script_exit(result)


@target_command("diagnose")
@steps_option(30, "Measured steps per experiment.")
@warmup_option(3)
@click.option("--explain", is_flag=True, help="The whole report: every interval, caveat and finding.")
@results("diagnose")
@target_arg
@with_targets("each experiment runs it again under perfcore run, its DataLoader changed from outside")
def diagnose_cmd(res: Results, steps, warmup, explain, target) -> None:
    """Stage 2: differential experiments (A: synthetic data, B: num_workers, C: decoder) name the
    bottleneck, each measured against the baseline's step.

    Writes diagnose.json, experiments.png and report.html into its folder (--out); with a script, a run
    folder per experiment inside it. The report goes to stderr, as run's does: the script's own output
    stays on stdout.
    """
    from perfcore.experiments.stages import diagnose_stage
    from perfcore.report.stage_text import render_diagnose, render_diagnose_brief

    what = load_target(target)
    result, files = diagnose_stage(what, res.folder, steps=steps, warmup=warmup, progress=res.progress())
    text = render_diagnose(result)
    # All of it is read back from the folder: `perfcore diagnose --explain` would run every experiment again.
    again = f"perfcore report {shlex.quote(str(res.folder))} --explain"
    # On stderr, as run's report: the script's lines on stdout are its own (and `--json -` keeps stdout).
    click.echo(
        clean(text if explain else render_diagnose_brief(result, f"{res.folder}/report.html; all evidence: {again}")),
        err=True,
    )
    res.done_with_report(result, text, files)
    _mirror_script_exit(result)


def _mirror_script_exit(result) -> None:
    """A script that failed after measured steps: the command exits with its code, as `run` does
    (the report above ends with the line that says how it failed)."""
    if result.script_exit is not None and result.script_exit.code:
        sys.exit(result.script_exit.code)


# The sweep's axes, in the order --help lists them; the command gets them as one grid.
_GRID_OPTIONS = (
    click.option(
        "--batch-size",
        type=ListOf(Number(int, low=0, low_open=True), "batch sizes"),
        help="Comma-separated, e.g. 8,16.",
    ),
    click.option(
        "--num-workers",
        type=ListOf(Number(int, low=0, high=1024), "worker counts"),
        help="Comma-separated, e.g. 0,2.",
    ),
    click.option("--pin-memory", type=ListOf("bool"), help="Comma-separated true/false."),
    click.option(
        "--prefetch-factor",
        type=ListOf(Number(int, low=0, low_open=True), "prefetch factors"),
        help="Comma-separated, e.g. 2,4.",
    ),
)


def grid_options(f):
    """The sweep's axes as options, given to the command as one `grid` (axis -> the values given, or None)."""

    @functools.wraps(f)
    def command(*args, **kw):
        return f(*args, grid={axis: kw.pop(axis) for axis in SETTINGS}, **kw)

    for option in reversed(_GRID_OPTIONS):
        command = option(command)
    return command


@target_command("sweep")
@grid_options
@steps_option(50, "Measured steps per configuration.")
@warmup_option(3)
@click.option("--budget", type=Number(float, low=0, low_open=True), help="Minutes; successive halving to fit.")
@click.option("--resume", is_flag=True, help="Continue the sweep in --out: keep the configurations it finished.")
@results("sweep")
@target_arg
@with_targets("each configuration runs it again under perfcore run, its DataLoader's settings changed from outside")
def sweep_cmd(res: Results, grid, steps, warmup, budget, resume, target) -> None:
    """Stage 3: batch_size x num_workers x pin_memory x prefetch_factor; heatmaps, best, knees.

    Writes sweep.json, sweep.csv, the heatmaps (PNG) and report.html into its folder (--out). With a
    script: a run folder per configuration, and dataloader.patch, the best settings as a change to the
    script's DataLoader call, to apply with `git apply` (the script itself is never changed; written when
    the best differs from the script's own settings and the script lies under the current folder).

    A configuration that crashes, runs out of memory or cannot run is recorded with its reason;
    Ctrl-C keeps the configurations finished so far, and --resume continues them.
    """
    from perfcore.experiments.stages import sweep_stage
    from perfcore.report.stage_text import render_sweep

    if resume and not res.out:
        raise click.UsageError("--resume needs --out: the folder of the sweep to continue")
    what = load_target(target)
    if resume:
        from perfcore.run.parent.folder import reuse_out

        res.continue_in(reuse_out(Path(res.out), "sweep.json"))
    result, files = sweep_stage(
        what,
        res.folder,
        grid,
        steps=steps,
        warmup=warmup,
        budget_s=budget * 60 if budget else None,
        resume=resume,
        progress=res.progress(),
    )
    text = render_sweep(result, str(res.folder))
    res.echo(clean(text))
    res.done_with_report(result, text, files)
    if result.interrupted:
        click.echo(
            f"perfcore: interrupted: {len(result.configs)} configuration(s) kept; "
            f"continue with --resume --out {shlex.quote(str(res.folder))}",
            err=True,
        )
        sys.exit(EXIT_INTERRUPTED)
    if result.best is None:
        from perfcore.report.words.runs import config_failure

        first = next((c for c in result.configs if config_failure(c)), {})
        click.echo(
            "perfcore: error: no configuration could be measured"
            + (f" (first: {first.get('status')}: {one_line(config_failure(first))[:300]})" if first else ""),
            err=True,
        )
        sys.exit(EXIT_FAILURE)


@click.command("demo")
@click.option("--quick", is_flag=True, help="Fewer steps (for tests).")
@click.option("--explain", is_flag=True, help="The whole report: every interval, caveat and finding.")
@results("demo")
def demo_cmd(res: Results, quick, explain) -> None:
    """health + run + diagnose on the built-in demo workload (real JPEGs, PIL decode, a small CNN).

    No target: the JPEGs are made once, in ~/.cache/perfcore (or $PERFCORE_CACHE). Writes health.json,
    run.json, steps.csv, diagnose.json, breakdown.png, experiments.png, summary.md, demo.json and
    report.html into its folder (--out).
    """
    from perfcore.experiments.demo import run_demo
    from perfcore.report.stage_text import render_demo, render_demo_brief

    result = run_demo(res.folder, quick=quick, progress=res.progress())
    text = render_demo(result)
    res.echo(clean(text if explain else render_demo_brief(result, res.folder)))
    res.done_with_report(result, text, list(result.files))
