"""The perfcore command line: each command parses, calls one function, renders. The options every
command shares (--out, --json, --quiet, --steps) and the checks of every value are defined once here;
every failure ends in one line on stderr and an exit code. Heavy imports (torch, pandas, the native
core) happen inside each command, so `perfcore --help` stays instant."""
from __future__ import annotations

import functools
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from perfcore.errors import PerfcoreError

__all__ = ["main", "cli"]

# Exit codes: 0 ok, 1 failure, 2 usage, 3 GPU/CUPTI unavailable; 130 interrupted (128 + SIGINT).
EXIT_FAILURE, EXIT_USAGE, EXIT_NO_DEVICE, EXIT_INTERRUPTED = 1, 2, 3, 130


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class PerfcoreGroup(click.Group):
    """Every way a command can fail ends here as one line on stderr and an exit code:
    usage (2), perfcore's own errors (their code), a file that cannot be written (1), Ctrl-C (130),
    and anything unexpected (1, named as perfcore's fault). PERFCORE_DEBUG=1 shows the traceback."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            sys.exit(rv if isinstance(rv, int) else 0)
        except Exception as e:  # SystemExit (the script's exit code) passes through
            code, line = _failure(e)
            err: BaseException = e
        except KeyboardInterrupt as e:
            code, line, err = EXIT_INTERRUPTED, "perfcore: interrupted", e
        if os.environ.get("PERFCORE_DEBUG"):
            traceback.print_exception(type(err), err, err.__traceback__)
        click.echo(_one_line(line)[:2000], err=True)
        sys.exit(code)


def _failure(e: Exception) -> tuple[int, str]:
    """(exit code, the one line) for an exception that ended a command."""
    if isinstance(e, click.exceptions.Abort):
        return EXIT_INTERRUPTED, "perfcore: interrupted"
    if isinstance(e, click.UsageError):
        where = e.ctx.command_path if e.ctx else "perfcore"
        return e.exit_code, f"{where}: error: {e.format_message()} (see '{where} --help')"
    if isinstance(e, click.ClickException):
        return e.exit_code, f"perfcore: error: {e.format_message()}"
    if isinstance(e, PerfcoreError):
        return e.exit_code, f"perfcore: error: {e}"
    if isinstance(e, OSError):
        return EXIT_FAILURE, f"perfcore: error:{f' {e.filename}:' if e.filename else ''} {e.strerror or e}"
    return EXIT_FAILURE, (f"perfcore: internal error: {type(e).__name__}: {e} "
                          "(a perfcore bug: PERFCORE_DEBUG=1 shows where; please report it)")


# ---- values: every number is checked once, here (nan, inf, negative, zero where meaningless, not a number)

class Number(click.ParamType):
    """A finite int or float within [low, high] (low excluded when low_open); see perfcore.run.options."""

    def __init__(self, kind: type = float, low: float | None = None, high: float | None = None,
                 low_open: bool = False):
        self.kind, self.low, self.high, self.low_open = kind, low, high, low_open
        self.name = "integer" if kind is int else "number"

    def convert(self, value, param, ctx):
        from perfcore.run.options import number

        try:
            return number(value, "", kind=self.kind, low=self.low, high=self.high, low_open=self.low_open)
        except PerfcoreError as e:
            self.fail(str(e).removeprefix(": "), param, ctx)


COUNT = Number(int, low=1, high=10**9)       # steps, repeats: at least one
NONNEG = Number(int, low=0, high=10**9)      # warm-up steps


class Duration(click.ParamType):
    """100ms, 0.5s or 1 (seconds): finite, at least 10 ms."""

    name = "duration"

    def convert(self, value, param, ctx):
        from perfcore.run.options import duration

        try:
            return duration(value, "")
        except PerfcoreError as e:
            self.fail(str(e).removeprefix(": "), param, ctx)


class ListOf(click.ParamType):
    """Comma-separated values of one type: 8,16 or true,false."""

    def __init__(self, item: click.ParamType | str, what: str = "values"):
        self.item, self.what = item, what
        self.name = "list"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        words = [w.strip() for w in str(value).split(",") if w.strip()]
        if not words:
            self.fail("empty list", param, ctx)
        if self.item == "bool":
            table = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
            bad = [w for w in words if w.lower() not in table]
            if bad:
                self.fail(f"expected true/false values, got {bad[0]!r}", param, ctx)
            return [table[w.lower()] for w in words]
        try:
            return [self.item.convert(w, param, ctx) for w in words]
        except click.BadParameter as e:
            self.fail(f"{self.what} {e.message}", param, ctx)


# ---- the options every command shares, defined once

class Results:
    """Where a command's results go: the run folder (--out, made on first use), the JSON copy (--json),
    the human report (stdout, or stderr when stdout carries the JSON), progress (unless --quiet)."""

    def __init__(self, kind: str, out: str | None, json_path: str | None, quiet: bool):
        self.kind, self.out, self.json_path, self.quiet = kind, out, json_path, quiet
        self._folder: Path | None = None
        check_writable(json_path)

    @property
    def folder(self) -> Path:
        if self._folder is None:
            from perfcore.run.folder import prepare_out

            self._folder = prepare_out(Path(self.out) if self.out else None, self.kind)
        return self._folder

    def continue_in(self, folder: Path) -> None:
        """Results go into an earlier command's folder (checked by the caller), not a new one."""
        self._folder = folder

    def echo(self, text: str) -> None:
        click.echo(text, err=self.json_path == "-")

    def progress(self) -> "Progress":
        return Progress(quiet=self.quiet)

    def done(self, doc: dict | None, files: list[str] | None = None, folder: Path | None = None) -> None:
        """Says what was written, then writes the JSON copy."""
        if files:
            click.echo(f"wrote {folder or self.folder}/: " + ", ".join(files), err=True)
        if doc is not None:
            write_json(doc, self.json_path)


def results(kind: str, out: bool = True):
    """--out (when the command writes a folder), --json and --quiet; the command gets `res: Results`."""
    def deco(f):
        @functools.wraps(f)
        def wrapper(*args, out=None, json_path=None, quiet=False, **kw):
            return f(Results(kind, out, json_path, quiet), *args, **kw)

        wrapper = click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr.")(wrapper)
        wrapper = click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), default=None,
                               help="Also write the result as JSON to PATH ('-' for stdout).")(wrapper)
        if out:
            wrapper = click.option("--out", type=click.Path(file_okay=False), default=None,
                                   help=f"Folder for the results (default ./perfcore-runs/{kind}-<time>-<id>; "
                                        "an existing folder that is not empty is left as it is and a new "
                                        "subfolder is used).")(wrapper)
        return wrapper
    return deco


def folder_report(res: Results, kind: str, doc: dict, text: str, files: list[str]) -> list[str]:
    """report.html in an experiment's folder (its plots inline, heatmaps included); the files with it."""
    from perfcore.report.html import write_folder_report

    write_folder_report(res.folder, f"perfcore {kind}", doc, text, files)
    return list(files) + ["report.html"]


def steps_option(default: int | None, help: str = "Measured steps (after warm-up)."):
    return click.option("--steps", type=COUNT, default=default, show_default=default is not None, help=help)


def warmup_option(default: int):
    return click.option("--warmup", type=NONNEG, default=default, show_default=True,
                        help="Steps at the start reported apart.")


def check_writable(path: str | None) -> None:
    """Fail before the work, not after it, when a result could not be saved."""
    if not path or path == "-":
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise click.ClickException(f"cannot write JSON to {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise click.ClickException(f"cannot write JSON to {path}: folder {parent} is not writable")


def write_json(doc: dict, path: str | None) -> None:
    if not path:
        return
    from perfcore.report import jsonio

    if path == "-":
        click.echo(jsonio.dumps(doc), nl=False)
        return
    jsonio.write(Path(path), doc)
    click.echo(f"wrote {path}", err=True)


class Progress:
    """Steps and ETA on stderr: one rewritten line on a terminal, a line per stage elsewhere; nothing when quiet."""

    def __init__(self, label: str = "", quiet: bool = False):
        import time

        self.tty = sys.stderr.isatty()
        self.quiet = quiet
        self.label = label
        self.t0 = time.perf_counter()
        self.stage_t0 = self.t0
        self._last = -1.0

    def stage(self, name: str) -> None:
        import time

        self.label = name
        self.stage_t0 = time.perf_counter()
        if not self.tty and not self.quiet:
            click.echo(f"  {name} ...", err=True)

    def steps(self, done: int, total: int) -> None:
        import time

        if not self.tty or self.quiet:
            return
        now = time.perf_counter()
        if now - self._last < 0.2 and done < total:
            return
        self._last = now
        eta = (now - self.stage_t0) / done * (total - done) if done else 0.0
        click.echo(f"\r  {self.label}: {done}/{total} steps, ETA {eta:.0f} s   ", err=True, nl=done >= total)

    def configs(self, done: int, total: int, eta, label: str) -> None:
        if self.quiet:
            return
        msg = f"  [{done}/{total}] {label}" + (f", ETA {eta:.0f} s" if eta is not None else "")
        if self.tty:
            click.echo(f"\r{msg:<90}", err=True, nl=done >= total)
        else:
            click.echo(msg, err=True)


class TargetCommand(click.Command):
    """A command whose TARGET is a workload (demo, FILE.py:FUNC) or, after --, a program to run.
    Options may follow a workload (`perfcore health demo --steps 10`); everything after a program
    (or after --) is the program's own."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" not in args:
            probe = self.make_parser(ctx)
            probe.allow_interspersed_args = False
            try:
                opts, _, _ = probe.parse_args(list(args))
                got = opts.get("target")  # a sentinel (not a tuple) when no target was given
                rest = list(got) if isinstance(got, (list, tuple)) else []
            except click.UsageError:
                rest = []
            if rest:
                from perfcore.experiments.stages import is_workload_spec

                if is_workload_spec(rest[0]) and not os.path.isfile(rest[0]):
                    ctx.allow_interspersed_args = True
        return super().parse_args(ctx, args)


def target_command(name: str):
    return cli.command(name, cls=TargetCommand,
                       context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})


target_arg = click.argument("target", nargs=-1, type=click.UNPROCESSED)


def _target(words):
    """The workload (loaded) or command (checked) a triage command works on, before any folder is made."""
    from perfcore.experiments.stages import parse_target

    return parse_target(words).check()


@click.group(cls=PerfcoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="perfcore")
def cli() -> None:
    """perfcore: where every millisecond of a PyTorch training step goes.

    Each step's wall time is split into load / transfer / compute / comm / host; perfcore names
    the bottleneck, says what to change, and runs the experiment that proves it.
    """


_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "info": "info"}
_COLOR = {"ok": "green", "warn": "yellow", "fail": "red", "info": None}


@cli.command("env")
@results("env", out=False)
def env_cmd(res: Results) -> None:
    """Build info and a non-destructive check of this machine (GPU, CPU, limits, versions)."""
    from perfcore.capture.environment import environment_report

    report = environment_report()
    b = report["build"]
    res.echo(f"perfcore {_version()}  build: {b.get('mode')} mode" + (f" ({b['reason']})" if b.get("reason") else ""))
    width = max(len(c["name"]) for c in report["checks"])
    for c in report["checks"]:
        res.echo(f"  {click.style(_MARK[c['status']], fg=_COLOR[c['status']])}  {c['name']:<{width}}  {c['value']}")
        if c["fix"]:
            res.echo(f"        {'':<{width}}  -> {c['fix']}")
    s = report["summary"]
    res.echo(f"{s['ok']} ok, {s['warn']} warnings, {s['fail']} failures")
    res.done(report)
    if s["fail"]:
        sys.exit(EXIT_FAILURE)


@cli.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@steps_option(None, "Stop the script after N measured steps (after warm-up).")
@warmup_option(5)
@click.option("--backend", type=click.Choice(["auto", "native", "cupti-python", "host"]), default="auto",
              show_default=True, help="How GPU activity is captured.")
@click.option("--no-kernels", is_flag=True, help="Do not trace kernels (CUDA events only).")
@click.option("--monitor", "monitor", type=Duration(), default=None,
              help="Also sample GPU/CPU every INTERVAL (e.g. 100ms), aligned to steps.")
@click.option("--step-on", type=click.Choice(["optimizer", "backward", "batch", "forward"]), default=None,
              help="What ends a step (default: the first of these the script does).")
@results("run")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run_cmd(res: Results, steps, warmup, backend, no_kernels, monitor, step_on, command) -> None:
    """Profile an unmodified script: perfcore run [OPTIONS] -- python train.py ARGS...

    Attributes every training step to load / transfer / compute / comm / host, names the
    bottleneck and says what to try. Exits with the script's exit code.
    """
    from perfcore.report.terminal import render_text
    from perfcore.run.launch import run_command

    # run_command checks the command before it makes the folder: a typo leaves nothing behind.
    rc, doc, out_dir = run_command(list(command), steps=steps, warmup=warmup, out=Path(res.out) if res.out else None,
                                   backend=backend, kernels=not no_kernels, monitor_s=monitor, step_on=step_on,
                                   quiet=res.quiet, stdout_to_stderr=res.json_path == "-")
    res.echo(render_text(doc))
    res.done(doc, list(doc.get("files", {})), out_dir)
    sys.exit(rc)


@cli.command("merge")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@results("merge")
def merge_cmd(res: Results, dirs) -> None:
    """Merge run folders written on different nodes of one job (each ran perfcore run -- torchrun ...)."""
    from perfcore.report.terminal import render_text
    from perfcore.run.finish import merge_dirs

    # merge_dirs makes the merged folder only once the parts are read and found to be one job's.
    doc = merge_dirs([Path(d) for d in dirs], Path(res.out) if res.out else None)
    res.echo(render_text(doc))
    res.done(doc, list(doc.get("files", {})), doc["_out"])


@cli.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--html", "html", is_flag=True, help="Also rewrite the folder's report.html.")
@results("report", out=False)
def report_cmd(res: Results, run_dir, html) -> None:
    """Re-render the report and plots of a run folder."""
    from perfcore.report.plots import plot_breakdown
    from perfcore.report.reader import load_run
    from perfcore.report.terminal import render_text

    doc, steps = load_run(Path(run_dir))
    res.echo(render_text(doc))
    plotted = len(steps) > 0  # a run that saw no step has nothing to plot
    if plotted:
        plot_breakdown(steps, Path(run_dir) / "breakdown.png", title=doc["verdict"]["summary"])
    if html:
        from perfcore.report.html import write_report

        write_report(Path(run_dir), doc, steps)
    res.done(doc, ["breakdown.png"] * plotted + (["report.html"] if html else []), Path(run_dir))


@cli.command("compare")
@click.argument("run_a", type=click.Path(exists=True, file_okay=False))
@click.argument("run_b", type=click.Path(exists=True, file_okay=False))
@click.option("--fail-above", type=Number(float), default=None,
              help="Exit 1 when B's mean step time is more than PCT percent slower than A's (a CI gate).")
@results("compare", out=False)
def compare_cmd(res: Results, run_a, run_b, fail_above) -> None:
    """Per-label and per-kernel-category change from RUN_A to RUN_B, and the speedup."""
    from perfcore.analysis.compare import compare_runs, render_compare
    from perfcore.report.reader import load_run

    a, _ = load_run(Path(run_a), measured=True)
    b, _ = load_run(Path(run_b), measured=True)
    doc = compare_runs(a, b)
    res.echo(render_compare(doc))
    res.done(doc)
    change = doc["step_time_change_pct"]
    # Written so that a change that is not a number fails the gate rather than passing it.
    if fail_above is not None and not change <= fail_above:
        click.echo(f"perfcore: regression: step time {change:+.1f}% > {fail_above:g}%", err=True)
        sys.exit(EXIT_FAILURE)


@target_command("health")
@steps_option(100)
@click.option("--interval", type=Duration(), default="100ms", show_default=True, help="Sampling interval.")
@results("health")
@target_arg
def health_cmd(res: Results, steps, interval, target) -> None:
    """Stage 1: is the device busy? 100 iterations of next batch -> forward -> loss.

    TARGET: demo | resnet18 | FILE.py:FUNCTION (returns perfcore.Workload) | -- python train.py ...
    """
    from perfcore.experiments.stages import health_stage
    from perfcore.report.experiments import render_health

    doc, files = health_stage(_target(target), res.folder, steps=steps, interval_s=interval,
                              progress=res.progress())
    text = render_health(doc)
    res.echo(text)
    res.done(doc, folder_report(res, "health", doc, text, files))


@target_command("diagnose")
@steps_option(30, "Measured steps per experiment.")
@warmup_option(3)
@results("diagnose")
@target_arg
def diagnose_cmd(res: Results, steps, warmup, target) -> None:
    """Stage 2: differential experiments (synthetic data, num_workers, decoder) name the bottleneck."""
    from perfcore.experiments.stages import diagnose_stage
    from perfcore.report.experiments import render_diagnose

    doc, files = diagnose_stage(_target(target), res.folder, steps=steps, warmup=warmup, progress=res.progress())
    text = render_diagnose(doc)
    res.echo(text)
    res.done(doc, folder_report(res, "diagnose", doc, text, files))


@target_command("sweep")
@click.option("--batch-size", "batch_size", type=ListOf(Number(int, low=0, low_open=True), "batch sizes"),
              default=None, help="Comma-separated, e.g. 8,16.")
@click.option("--num-workers", "num_workers", type=ListOf(Number(int, low=0, high=1024), "worker counts"),
              default=None,
              help="Comma-separated, e.g. 0,2.")
@click.option("--pin-memory", "pin_memory", type=ListOf("bool"), default=None, help="Comma-separated true/false.")
@click.option("--prefetch-factor", "prefetch_factor", type=ListOf(Number(int, low=0, low_open=True), "prefetch factors"),
              default=None, help="Comma-separated, e.g. 2,4.")
@steps_option(50, "Measured steps per configuration.")
@warmup_option(3)
@click.option("--budget", type=Number(float, low=0, low_open=True), default=None,
              help="Minutes; successive halving to fit.")
@click.option("--resume", is_flag=True, help="Continue the sweep in --out: keep the configurations it finished.")
@results("sweep")
@target_arg
def sweep_cmd(res: Results, batch_size, num_workers, pin_memory, prefetch_factor, steps, warmup, budget, resume,
              target) -> None:
    """Stage 3: batch_size x num_workers x pin_memory x prefetch_factor; heatmaps, best, knees.

    A configuration that crashes, runs out of memory or cannot run is recorded with its reason;
    Ctrl-C keeps the configurations finished so far, and --resume continues them.
    """
    from perfcore.experiments.stages import sweep_stage
    from perfcore.report.experiments import render_sweep

    if resume and not res.out:
        raise click.UsageError("--resume needs --out: the folder of the sweep to continue")
    what = _target(target)
    if resume:
        from perfcore.run.folder import reuse_out

        res.continue_in(reuse_out(Path(res.out), "sweep.json"))
    grid = {"batch_size": batch_size, "num_workers": num_workers, "pin_memory": pin_memory,
            "prefetch_factor": prefetch_factor}
    doc, files = sweep_stage(what, res.folder, grid, steps=steps, warmup=warmup,
                             budget_s=budget * 60 if budget else None, resume=resume, progress=res.progress())
    text = render_sweep(doc)
    res.echo(text)
    res.done(doc, folder_report(res, "sweep", doc, text, files))
    if doc["interrupted"]:
        click.echo(f"perfcore: interrupted: {len(doc['configs'])} configuration(s) kept; "
                   f"continue with --resume --out {res.folder}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if doc["best"] is None:
        first = next((c for c in doc["configs"] if c.get("error")), {})
        click.echo(f"perfcore: error: no configuration could be measured"
                   + (f" (first: {first.get('status')}: {_one_line(first['error'])[:300]})" if first else ""), err=True)
        sys.exit(EXIT_FAILURE)


@cli.command("monitor", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--interval", type=Duration(), default="100ms", show_default=True,
              help="Sampling interval (100ms, 0.5s, 1).")
@results("monitor")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def monitor_cmd(res: Results, interval, command) -> None:
    """Sample GPU (util, memory, power, temperature, SM clock), CPU and RAM while CMD runs; CSV + PNG."""
    from perfcore.report import jsonio
    from perfcore.run.launch import check_command, run_child
    from perfcore.capture.sampler import Sampler
    from perfcore.report.plots import plot_timeline

    cmd = list(command)
    check_command(cmd)
    out_dir = res.folder
    s = Sampler(interval).start()
    try:
        rc = run_child(cmd, dict(os.environ))
    finally:
        frame = s.stop()
    files = ["monitor.csv"]
    jsonio.write_csv(out_dir / "monitor.csv", frame)
    if len(frame):
        plot_timeline(frame, out_dir / "monitor.png", title=" ".join(cmd)[:100])
        files.append("monitor.png")
    if s.note:
        click.echo(f"perfcore monitor: {s.note}", err=True)
    click.echo(f"perfcore monitor: {len(frame)} samples every {interval * 1e3:.0f} ms", err=True)
    res.done(None, files)
    sys.exit(rc)


@cli.command("transfer")
@click.option("--sizes", default="4K..1G", show_default=True, help="Range a..b (x4 steps) or a list: 4K,1M,256M.")
@click.option("--direction", default="h2d,d2h", show_default=True)
@click.option("--repeats", type=COUNT, default=10, show_default=True)
@click.option("--batch-shape", default=None, help="e.g. 128,3,224,224: ms per batch pinned vs pageable, and overlap.")
@click.option("--dtype", default="float32", show_default=True)
@results("transfer")
def transfer_cmd(res: Results, sizes, direction, repeats, batch_shape, dtype) -> None:
    """Pinned vs pageable copy bandwidth (CUDA events), against the link's nominal rate."""
    from perfcore.experiments.transfer import parse_shape, parse_sizes

    size_list = parse_sizes(sizes)
    dirs = [d.strip() for d in direction.split(",") if d.strip()]
    bad = [d for d in dirs if d not in ("h2d", "d2h")]
    if bad or not dirs:
        raise click.BadParameter(f"directions are h2d and d2h, got {direction!r}", param_hint="--direction")
    shape = parse_shape(batch_shape) if batch_shape else None
    from perfcore._native import require_cuda

    require_cuda("perfcore transfer")  # exits 3 with the reason on a machine without a GPU
    from perfcore.report import jsonio
    from perfcore.report.plots import plot_transfer
    from perfcore.experiments.transfer import batch_cost, measure, nominal_link_gbps, summarize_curve

    out_dir = res.folder
    curve = measure(size_list, dirs, repeats)
    link = nominal_link_gbps()
    doc = {"schema": "perfcore.experiments.transfer/1", "curve": curve.to_dict("records"), "link": link,
           "summary": summarize_curve(curve, link.get("gbps"))}
    if shape:
        doc["batch"] = batch_cost(shape, dtype)
    jsonio.write_csv(out_dir / "transfer.csv", curve)
    plot_transfer(curve, out_dir / "transfer.png", link.get("gbps"))
    jsonio.write(out_dir / "transfer.json", doc)
    files = ["transfer.json", "transfer.csv", "transfer.png"]
    for k, v in doc["summary"].items():
        res.echo(f"  {k}: {v:.2f}")
    if shape:
        b = doc["batch"]
        res.echo(f"  batch {tuple(shape)} {dtype}: pinned {b['pinned_ms']:.2f} ms, pageable {b['pageable_ms']:.2f} ms; "
                 f"non_blocking overlaps a kernel: pinned {b['overlap_pinned']}, pageable {b['overlap_pageable']}")
    res.done(doc, files)


@cli.command("graph")
@click.argument("workload")
@steps_option(50)
@results("graph")
def graph_cmd(res: Results, workload, steps) -> None:
    """Eager vs CUDA-Graph step time, launch overhead, and a same-result check against eager."""
    from perfcore._native import require_cuda

    require_cuda("perfcore graph")
    from perfcore.experiments.graph import graph_experiment
    from perfcore.report import jsonio

    from perfcore.workloads import load_workload

    doc = graph_experiment(load_workload(workload), steps=steps)
    jsonio.write(res.folder / "graph.json", doc)
    lo = doc["launch_overhead"]
    res.echo(f"launch overhead: eager {lo['eager_host_us_per_launch']:.2f} us/launch (host), "
             f"graph {lo['graph_us_per_kernel']:.2f} us/kernel")
    if doc.get("captured"):
        c = doc["check"]
        res.echo(f"step: eager {doc['eager_step_ms']:.3f} ms, graphed {doc['graph_step_ms']:.3f} ms "
                 f"({doc['speedup']:.2f}x); same results as eager: {c['match']} "
                 f"(loss rel err {c['max_loss_rel_error']:.1e}, params {c['max_param_rel_error']:.1e})")
    else:
        res.echo(f"not captured: {doc['error']}")
    res.done(doc, ["graph.json"])
    if not doc.get("captured"):
        sys.exit(EXIT_FAILURE)


@cli.command("demo")
@click.option("--quick", is_flag=True, help="Fewer steps (for tests).")
@results("demo")
def demo_cmd(res: Results, quick) -> None:
    """health + run + diagnose on the built-in demo workload (real JPEGs, PIL decode, a small CNN)."""
    from perfcore.experiments.demo import run_demo

    doc = run_demo(res.folder, quick=quick, progress=res.progress())
    res.echo(doc["_text"])
    res.done({k: v for k, v in doc.items() if not k.startswith("_")},
             folder_report(res, "demo", doc, doc["_text"], list(doc["files"])))


def _version() -> str:
    from perfcore import __version__

    return __version__


def main() -> None:
    cli(prog_name="perfcore")


if __name__ == "__main__":
    main()
