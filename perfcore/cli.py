"""The perfcore command line. Heavy imports (torch, pandas, the native core) happen inside each
command, so `perfcore --help` stays instant."""
from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

import click

from .errors import PerfcoreError

__all__ = ["main", "cli"]

# Exit codes (HOUSE_STYLE): 0 ok, 1 failure, 2 usage, 3 GPU/CUPTI unavailable.
EXIT_FAILURE, EXIT_USAGE, EXIT_NO_DEVICE = 1, 2, 3


class PerfcoreGroup(click.Group):
    """Turns expected failures into one line and an exit code; PERFCORE_DEBUG=1 shows the traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PerfcoreError as e:
            if os.environ.get("PERFCORE_DEBUG"):
                traceback.print_exc()
            click.echo(f"perfcore: error: {e}", err=True)
            ctx.exit(e.exit_code)


def json_option(f):
    return click.option(
        "--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), default=None,
        help="Also write the result as JSON to PATH ('-' for stdout).",
    )(f)


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
    text = json.dumps(doc, indent=2, sort_keys=False, default=_json_default) + "\n"
    if path == "-":
        click.echo(text, nl=False)
        return
    try:
        with open(path, "w") as fh:
            fh.write(text)
    except OSError as e:
        raise click.ClickException(f"cannot write JSON to {path}: {e.strerror}")
    click.echo(f"wrote {path}", err=True)


def _json_default(o: Any) -> Any:
    # numpy scalars and arrays reach JSON from analysis results.
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


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
@json_option
def env_cmd(json_path: str | None) -> None:
    """Build info and a non-destructive check of this machine (GPU, CPU, limits, versions)."""
    check_writable(json_path)
    from .envcheck import environment_report

    report = environment_report()
    to_stdout = json_path == "-"
    echo = (lambda *a, **k: click.echo(*a, err=True, **k)) if to_stdout else click.echo
    b = report["build"]
    echo(f"perfcore {_version()}  build: {b.get('mode')} mode" + (f" ({b['reason']})" if b.get("reason") else ""))
    width = max(len(c["name"]) for c in report["checks"])
    for c in report["checks"]:
        mark = click.style(_MARK[c["status"]], fg=_COLOR[c["status"]])
        echo(f"  {mark}  {c['name']:<{width}}  {c['value']}")
        if c["fix"]:
            echo(f"        {'':<{width}}  -> {c['fix']}")
    s = report["summary"]
    echo(f"{s['ok']} ok, {s['warn']} warnings, {s['fail']} failures")
    write_json(report, json_path)
    if s["fail"]:
        sys.exit(EXIT_FAILURE)


def _echo_files(out, doc) -> None:
    files = doc.get("files", {})
    click.echo(f"wrote {out}/: " + ", ".join(files), err=True)


@cli.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--steps", type=int, default=None, help="Stop the script after N measured steps (after warm-up).")
@click.option("--warmup", type=int, default=5, show_default=True, help="Steps reported apart at the start.")
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Run folder (default ./perfcore-runs/<timestamp>).")
@click.option("--backend", type=click.Choice(["auto", "native", "cupti-python", "host"]), default="auto",
              show_default=True, help="How GPU activity is captured.")
@click.option("--no-kernels", is_flag=True, help="Do not trace kernels (CUDA events only).")
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run_cmd(steps, warmup, out, backend, no_kernels, json_path, command) -> None:
    """Profile an unmodified script: perfcore run [OPTIONS] -- python train.py ARGS...

    Attributes every training step to load / transfer / compute / comm / host, names the
    bottleneck and says what to try. Exits with the script's exit code.
    """
    check_writable(json_path)
    from pathlib import Path

    from .export.terminal import render_text
    from .launch import run_command

    rc, doc, out_dir = run_command(list(command), steps=steps, warmup=warmup, out=Path(out) if out else None,
                                   backend=backend, kernels=not no_kernels)
    echo = (lambda *a, **k: click.echo(*a, err=True, **k)) if json_path == "-" else click.echo
    echo(render_text(doc))
    _echo_files(out_dir, doc)
    write_json(doc, json_path)
    sys.exit(rc)


@cli.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@json_option
def report_cmd(run_dir, json_path) -> None:
    """Re-render the report and plots of a run folder."""
    from pathlib import Path

    from .export.plots import plot_breakdown
    from .export.terminal import render_text
    from .launch import load_run

    doc, steps = load_run(Path(run_dir))
    click.echo(render_text(doc), err=json_path == "-")
    plot_breakdown(steps, Path(run_dir) / "breakdown.png", title=doc["verdict"]["summary"])
    write_json(doc, json_path)


@cli.command("compare")
@click.argument("run_a", type=click.Path(exists=True, file_okay=False))
@click.argument("run_b", type=click.Path(exists=True, file_okay=False))
@click.option("--fail-above", type=float, default=None,
              help="Exit 1 when B's mean step time is more than PCT percent slower than A's (a CI gate).")
@json_option
def compare_cmd(run_a, run_b, fail_above, json_path) -> None:
    """Per-label and per-kernel-category change from RUN_A to RUN_B, and the speedup."""
    from pathlib import Path

    from .compare import compare_runs, render_compare
    from .launch import load_run

    a, _ = load_run(Path(run_a))
    b, _ = load_run(Path(run_b))
    doc = compare_runs(a, b)
    click.echo(render_compare(doc), err=json_path == "-")
    write_json(doc, json_path)
    if fail_above is not None and doc["step_time_change_pct"] > fail_above:
        click.echo(f"perfcore: regression: step time {doc['step_time_change_pct']:+.1f}% > {fail_above}%", err=True)
        sys.exit(EXIT_FAILURE)


def _version() -> str:
    from . import __version__

    return __version__


def main() -> None:
    cli(prog_name="perfcore")


if __name__ == "__main__":
    main()
