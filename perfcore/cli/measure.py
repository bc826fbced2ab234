"""The commands that measure a user's own program: run (steps, attributed) and monitor (device and host samples)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from perfcore.cli.output import echo_fitted
from perfcore.cli.shared import Duration, Results, results, steps_option, warmup_option

__all__ = ["run_cmd", "monitor_cmd"]


# perfcore run's options about the run itself, in the order --help lists them (the hidden --test-setting:
# tests and benchmarks shorten or slow the child's upkeep here, never through the environment).
_RUN_OPTIONS = (
    steps_option(None, "Stop the script after N measured steps (after warm-up)."),
    warmup_option(5),
    click.option(
        "--backend",
        type=click.Choice(["auto", "native", "cupti-python", "host"]),
        default="auto",
        show_default=True,
        help="How GPU activity is captured.",
    ),
    click.option("--no-kernels", is_flag=True, help="Do not trace kernels (CUDA events only)."),
    click.option(
        "--monitor",
        type=Duration(),
        default="250ms",
        show_default=True,
        help="Sample GPU utilisation, memory, power and host CPU every INTERVAL, aligned to the steps "
        "(report.html draws them on the steps' axis).",
    ),
    click.option("--no-monitor", is_flag=True, help="Do not sample (no monitor.csv)."),
    click.option(
        "--lines/--no-lines",
        default=True,
        show_default=True,
        help="Sample the training thread's Python stack (100 Hz) and count .item()/.cpu() calls: the lines "
        "of the script that hold host time.",
    ),
    click.option(
        "--step-on",
        type=click.Choice(["optimizer", "backward", "batch", "forward"]),
        help="What ends a step (default: the first of these the script does).",
    ),
    click.option("--test-setting", "test_settings", multiple=True, hidden=True, metavar="NAME=SECONDS"),
)


def run_settings(f):
    """perfcore run's options about the run, given to the command as one RunSettings (`settings`), made when
    the command runs (--help imports nothing of the run)."""

    @functools.wraps(f)
    def command(*args, no_kernels, monitor, no_monitor, test_settings, **kw):
        from perfcore.run.parent.launch import RunSettings, parse_test_settings

        same = {k: kw.pop(k) for k in ("steps", "warmup", "backend", "step_on", "lines")}  # RunSettings' names
        settings = RunSettings(
            **same,
            kernels=not no_kernels,
            monitor_s=None if no_monitor else monitor,
            test_settings=parse_test_settings(test_settings),
        )
        return f(*args, settings=settings, **kw)

    for option in reversed(_RUN_OPTIONS):
        command = option(command)
    return command


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@run_settings
@click.option("--explain", is_flag=True, help="The whole report: every interval, caveat and finding.")
@results("run")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run_cmd(res: Results, settings, explain, command) -> None:
    """Profile an unmodified script: perfcore run [OPTIONS] -- python train.py ARGS...

    Attributes every training step to load / transfer / compute / comm / host, names the
    bottleneck and says what to try. Exits with the script's exit code.

    \b
    COMMAND, after --, runs your Python program as it is:
      python train.py ARGS, ./train.py ARGS,
      torchrun --nproc_per_node=2 train.py, accelerate launch train.py, ...

    Writes a run folder (--out): run.json, steps.csv, trace.json (open in ui.perfetto.dev), monitor.csv,
    the plots (PNG) and a self-contained report.html. The short report goes to stderr, so the script's
    own stdout stays whole.
    """
    from perfcore.run.parent.launch import run_command

    # run_command checks the command before it makes the folder: a typo leaves nothing behind.
    out = Path(res.out) if res.out else None
    rc, doc, out_dir = run_command(
        list(command), settings, out=out, quiet=res.quiet, stdout_to_stderr=res.json_path == "-"
    )
    # after the run: numpy and pandas load while the script runs
    from perfcore.safe_text import clean
    from perfcore.report.terminal import render_brief, render_text

    # On stderr, as `time` reports: the script's own stdout stays whole (perfcore run -- ... > out.txt).
    # Cleaned as `perfcore report` cleans it: the folder's and the script's names are the user's bytes.
    echo_fitted(clean(render_text(doc) if explain else render_brief(doc, out_dir)), err=True)
    res.done(doc.to_dict(), list(doc.files), out_dir)
    sys.exit(rc)


@click.command("monitor", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--interval", type=Duration(), default="100ms", show_default=True, help="Sampling interval (100ms, 0.5s, 1)."
)
@results("monitor")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def monitor_cmd(res: Results, interval, command) -> None:
    """Sample GPU (util, memory, power, temperature, SM clock), CPU and RAM while CMD runs; CSV + PNG.

    COMMAND, after --, is any program (python train.py ARGS, torchrun ...), run as it is. Writes
    monitor.csv and monitor.png into its folder (--out); exits with the program's exit code.
    """
    from perfcore import jsonio
    from perfcore.run.parent.command import check_command
    from perfcore.run.parent.launch import child_env, run_child
    from perfcore.capture.sampler import Sampler
    from perfcore.report.plots import plot_timeline

    cmd = list(command)
    check_command(cmd)
    out_dir = res.folder
    s = Sampler(interval).start()
    try:
        rc = run_child(cmd, child_env())
    finally:
        frame = s.stop()
    files = ["monitor.csv"]
    jsonio.write_csv(out_dir / "monitor.csv", frame)
    if len(frame):
        plot_timeline(frame, out_dir / "monitor.png", title=" ".join(cmd)[:100])
        files.append("monitor.png")
    if s.nvml_error:
        from perfcore.report.words.runs import sampling_words

        click.echo(f"perfcore monitor: {sampling_words(s.nvml_error)}", err=True)
    click.echo(f"perfcore monitor: {len(frame)} samples every {interval * 1e3:.0f} ms", err=True)
    res.done(None, files)
    sys.exit(rc)
