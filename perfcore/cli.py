"""The perfcore command line. Heavy imports (torch, pandas, the native core) happen inside each
command, so `perfcore --help` stays instant."""
from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from perfcore.errors import PerfcoreError

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


def _echo_for(json_path: str | None):
    """Where the human report goes: stderr when stdout carries the JSON (--json -)."""
    return (lambda *a, **k: click.echo(*a, err=True, **k)) if json_path == "-" else click.echo


def write_json(doc: dict, path: str | None) -> None:
    if not path:
        return
    from perfcore.report import jsonio

    if path == "-":
        click.echo(jsonio.dumps(doc), nl=False)
        return
    try:
        jsonio.write(Path(path), doc)
    except OSError as e:
        raise click.ClickException(f"cannot write JSON to {path}: {e.strerror}")
    click.echo(f"wrote {path}", err=True)


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
    from perfcore.capture.environment import environment_report

    report = environment_report()
    echo = _echo_for(json_path)
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
@click.option("--monitor", "monitor", default=None, help="Also sample GPU/CPU every INTERVAL (e.g. 100ms), aligned to steps.")
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run_cmd(steps, warmup, out, backend, no_kernels, monitor, json_path, command) -> None:
    """Profile an unmodified script: perfcore run [OPTIONS] -- python train.py ARGS...

    Attributes every training step to load / transfer / compute / comm / host, names the
    bottleneck and says what to try. Exits with the script's exit code.
    """
    check_writable(json_path)
    from pathlib import Path

    from perfcore.report.terminal import render_text
    from perfcore.run.launch import run_command

    rc, doc, out_dir = run_command(list(command), steps=steps, warmup=warmup, out=Path(out) if out else None,
                                   backend=backend, kernels=not no_kernels,
                                   monitor_s=_interval(monitor) if monitor else None)
    echo = _echo_for(json_path)
    echo(render_text(doc))
    _echo_files(out_dir, doc)
    write_json(doc, json_path)
    sys.exit(rc)


@cli.command("merge")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Merged run folder.")
@json_option
def merge_cmd(dirs, out, json_path) -> None:
    """Merge run folders written on different nodes of one job (each ran perfcore run -- torchrun ...)."""
    check_writable(json_path)
    from pathlib import Path

    from perfcore.report.terminal import render_text
    from perfcore.run.finish import merge_dirs
    from perfcore.run.folder import default_out

    out_dir = Path(out) if out else default_out()
    doc = merge_dirs([Path(d) for d in dirs], out_dir)
    click.echo(render_text(doc), err=json_path == "-")
    _echo_files(out_dir, doc)
    write_json(doc, json_path)


@cli.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@json_option
def report_cmd(run_dir, json_path) -> None:
    """Re-render the report and plots of a run folder."""
    from pathlib import Path

    from perfcore.report.plots import plot_breakdown
    from perfcore.report.terminal import render_text
    from perfcore.report.reader import load_run

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

    from perfcore.analysis.compare import compare_runs, render_compare
    from perfcore.report.reader import load_run

    a, _ = load_run(Path(run_a))
    b, _ = load_run(Path(run_b))
    doc = compare_runs(a, b)
    click.echo(render_compare(doc), err=json_path == "-")
    write_json(doc, json_path)
    if fail_above is not None and doc["step_time_change_pct"] > fail_above:
        click.echo(f"perfcore: regression: step time {doc['step_time_change_pct']:+.1f}% > {fail_above}%", err=True)
        sys.exit(EXIT_FAILURE)


class Progress:
    """Steps and ETA on stderr: one rewritten line on a terminal, a line per stage elsewhere."""

    def __init__(self, label: str = ""):
        import time

        self.tty = sys.stderr.isatty()
        self.label = label
        self.t0 = time.perf_counter()
        self.stage_t0 = self.t0
        self._last = -1.0

    def stage(self, name: str) -> None:
        import time

        self.label = name
        self.stage_t0 = time.perf_counter()
        if not self.tty:
            click.echo(f"  {name} ...", err=True)

    def steps(self, done: int, total: int) -> None:
        import time

        if not self.tty:
            return
        now = time.perf_counter()
        if now - self._last < 0.2 and done < total:
            return
        self._last = now
        eta = (now - self.stage_t0) / done * (total - done) if done else 0.0
        click.echo(f"\r  {self.label}: {done}/{total} steps, ETA {eta:.0f} s   ", err=True, nl=done >= total)

    def configs(self, done: int, total: int, eta, label: str) -> None:
        msg = f"  [{done}/{total}] {label}" + (f", ETA {eta:.0f} s" if eta is not None else "")
        if self.tty:
            click.echo(f"\r{msg:<90}", err=True, nl=done >= total)
        else:
            click.echo(msg, err=True)


def _target(target: tuple[str, ...]):
    """A workload spec (builtin name or FILE.py:FUNC / module:func) or a command to run."""
    from perfcore.workloads import BUILTINS

    if not target:
        raise click.UsageError("give a workload (demo, resnet18, FILE.py:FUNCTION) or -- python train.py ...")
    import shutil

    one = target[0]
    if len(target) == 1 and (one in BUILTINS or ":" in one or not (shutil.which(one) or os.path.isfile(one))):
        return "workload", one
    return "command", list(target)


def _load(spec: str, **kw):
    from perfcore.workloads import load_workload

    return load_workload(spec, **kw)


def _ints(text: str | None, name: str) -> list[int] | None:
    if text is None:
        return None
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {text!r}", param_hint=name)
    if not vals:
        raise click.BadParameter("empty list", param_hint=name)
    return vals


def _bools(text: str | None, name: str) -> list[bool] | None:
    if text is None:
        return None
    out = []
    for x in text.split(","):
        x = x.strip().lower()
        if x in ("true", "1", "yes"):
            out.append(True)
        elif x in ("false", "0", "no"):
            out.append(False)
        else:
            raise click.BadParameter(f"expected true/false values, got {x!r}", param_hint=name)
    return out


def _out_dir(out: str | None, kind: str):
    import time
    from pathlib import Path

    from perfcore.run.folder import prepare_out

    return prepare_out(Path(out) if out else Path("perfcore-runs") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}")


def _dump(doc: dict, path) -> None:
    from perfcore.report import jsonio

    jsonio.write(path, doc)


target_arg = click.argument("target", nargs=-1, type=click.UNPROCESSED)
out_option = click.option("--out", type=click.Path(file_okay=False), default=None, help="Folder for the results.")


@cli.command("health", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--steps", type=int, default=100, show_default=True)
@click.option("--interval", type=float, default=0.1, show_default=True, help="Sampling interval, seconds.")
@out_option
@json_option
@target_arg
def health_cmd(steps, interval, out, json_path, target) -> None:
    """Stage 1: is the device busy? 100 iterations of next batch -> forward -> loss.

    TARGET: demo | resnet18 | FILE.py:FUNCTION (returns perfcore.Workload) | -- python train.py ...
    """
    check_writable(json_path)
    kind, spec = _target(target)
    if steps <= 0:
        raise click.BadParameter("must be > 0", param_hint="--steps")
    out_dir = _out_dir(out, "health")
    from perfcore.report.experiments import render_health

    if kind == "command":
        from perfcore.experiments.scripts import script_health

        doc = script_health(spec, steps=steps, interval_s=interval, out=out_dir)
    else:
        from perfcore.experiments.health import health

        p = Progress("health")
        doc = health(_load(spec), steps=steps, interval_s=interval, progress=p.steps, target=spec)
    _dump(doc, out_dir / "health.json")
    click.echo(render_health(doc), err=json_path == "-")
    click.echo(f"wrote {out_dir}/health.json", err=True)
    write_json({k: v for k, v in doc.items() if not k.startswith("_")}, json_path)


@cli.command("diagnose", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--steps", type=int, default=30, show_default=True, help="Measured steps per experiment.")
@click.option("--warmup", type=int, default=3, show_default=True)
@out_option
@json_option
@target_arg
def diagnose_cmd(steps, warmup, out, json_path, target) -> None:
    """Stage 2: differential experiments (synthetic data, num_workers, decoder) name the bottleneck."""
    check_writable(json_path)
    kind, spec = _target(target)
    if steps <= 0:
        raise click.BadParameter("must be > 0", param_hint="--steps")
    out_dir = _out_dir(out, "diagnose")
    from perfcore.report.experiments import render_diagnose
    from perfcore.report.plots import plot_experiments

    p = Progress()
    if kind == "command":
        from perfcore.experiments.scripts import script_diagnose

        doc = script_diagnose(spec, steps=steps, warmup=warmup, out=out_dir, progress=p.stage)
    else:
        from perfcore.experiments.diagnose import diagnose

        doc = diagnose(_load(spec), steps=steps, warmup=warmup, progress=p.stage)
    _dump(doc, out_dir / "diagnose.json")
    plot_experiments(doc["experiments"], out_dir / "experiments.png", title=doc["verdict"]["summary"].split(";")[0])
    click.echo(render_diagnose(doc), err=json_path == "-")
    click.echo(f"wrote {out_dir}/: diagnose.json, experiments.png", err=True)
    write_json(doc, json_path)


@cli.command("sweep", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--batch-size", "batch_size", default=None, help="Comma-separated, e.g. 8,16.")
@click.option("--num-workers", "num_workers", default=None, help="Comma-separated, e.g. 0,2.")
@click.option("--pin-memory", "pin_memory", default=None, help="Comma-separated true/false.")
@click.option("--prefetch-factor", "prefetch_factor", default=None, help="Comma-separated, e.g. 2,4.")
@click.option("--steps", type=int, default=50, show_default=True, help="Measured steps per configuration.")
@click.option("--warmup", type=int, default=3, show_default=True)
@click.option("--budget", type=float, default=None, help="Minutes; successive halving to fit.")
@out_option
@json_option
@target_arg
def sweep_cmd(batch_size, num_workers, pin_memory, prefetch_factor, steps, warmup, budget, out, json_path,
              target) -> None:
    """Stage 3: batch_size x num_workers x pin_memory x prefetch_factor; heatmaps, best, knees."""
    check_writable(json_path)
    kind, spec = _target(target)
    if steps <= 0:
        raise click.BadParameter("must be > 0", param_hint="--steps")
    if budget is not None and budget <= 0:
        raise click.BadParameter("must be > 0 minutes", param_hint="--budget")
    given = {"batch_size": _ints(batch_size, "--batch-size"), "num_workers": _ints(num_workers, "--num-workers"),
             "pin_memory": _bools(pin_memory, "--pin-memory"), "prefetch_factor": _ints(prefetch_factor, "--prefetch-factor")}
    for k, v in given.items():
        if v is not None and k in ("batch_size",) and any(x <= 0 for x in v):
            raise click.BadParameter(f"batch sizes must be > 0, got {v}", param_hint="--batch-size")
        if v is not None and k == "num_workers" and any(x < 0 for x in v):
            raise click.BadParameter(f"must be >= 0, got {v}", param_hint="--num-workers")
    out_dir = _out_dir(out, "sweep")
    from perfcore.report.experiments import render_sweep
    from perfcore.experiments.sweep import default_grid
    from perfcore.report.plots import plot_heatmaps

    p = Progress()
    if kind == "command":
        from perfcore.experiments.scripts import script_sweep

        grid = {k: v if v is not None else d for (k, v), d in zip(given.items(), ([16], [0, 2], [False], [2]))}
        doc = script_sweep(spec, grid, steps=steps, warmup=warmup, out=out_dir, progress=p.configs)
    else:
        from perfcore.experiments.sweep import sweep

        w = _load(spec)
        grid = {k: v if v is not None else default_grid(w)[k] for k, v in given.items()}
        doc = sweep(w, grid, steps=steps, warmup=warmup, budget_s=budget * 60 if budget else None,
                    progress=p.configs)
    import pandas as pd

    table = pd.DataFrame(doc["configs"])
    table.to_csv(out_dir / "sweep.csv", index=False)
    heat = plot_heatmaps(table, out_dir)
    _dump(doc, out_dir / "sweep.json")
    click.echo(render_sweep(doc), err=json_path == "-")
    click.echo(f"wrote {out_dir}/: sweep.json, sweep.csv, " + ", ".join(h.name for h in heat), err=True)
    write_json(doc, json_path)


@cli.command("monitor", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--interval", default="100ms", show_default=True, help="Sampling interval (100ms, 0.5s, 1).")
@out_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def monitor_cmd(interval, out, command) -> None:
    """Sample GPU (util, memory, power, temperature, SM clock), CPU and RAM while CMD runs; CSV + PNG."""
    from perfcore.run.launch import check_command, run_child
    from perfcore.capture.sampler import Sampler
    from perfcore.report.plots import plot_timeline

    secs = _interval(interval)
    cmd = list(command)
    check_command(cmd)
    out_dir = _out_dir(out, "monitor")
    s = Sampler(secs).start()
    try:
        rc = run_child(cmd, dict(os.environ))
    finally:
        frame = s.stop()
    frame.to_csv(out_dir / "monitor.csv", index=False)
    if len(frame):
        plot_timeline(frame, out_dir / "monitor.png", title=" ".join(cmd)[:100])
    if s.note:
        click.echo(f"perfcore monitor: {s.note}", err=True)
    click.echo(f"perfcore monitor: {len(frame)} samples every {secs * 1e3:.0f} ms; wrote {out_dir}/: monitor.csv"
               + (", monitor.png" if len(frame) else ""), err=True)
    sys.exit(rc)


def _interval(text: str) -> float:
    t = text.strip().lower()
    try:
        if t.endswith("ms"):
            v = float(t[:-2]) / 1e3
        elif t.endswith("s"):
            v = float(t[:-1])
        else:
            v = float(t)
    except ValueError:
        raise click.BadParameter(f"not a duration: {text!r} (try 100ms or 0.5s)", param_hint="--interval")
    if v <= 0:
        raise click.BadParameter("must be > 0", param_hint="--interval")
    return v


@cli.command("transfer")
@click.option("--sizes", default="4K..1G", show_default=True, help="Range a..b (x4 steps) or a list: 4K,1M,256M.")
@click.option("--direction", default="h2d,d2h", show_default=True)
@click.option("--repeats", type=int, default=10, show_default=True)
@click.option("--batch-shape", default=None, help="e.g. 128,3,224,224: ms per batch pinned vs pageable, and overlap.")
@click.option("--dtype", default="float32", show_default=True)
@out_option
@json_option
def transfer_cmd(sizes, direction, repeats, batch_shape, dtype, out, json_path) -> None:
    """Pinned vs pageable copy bandwidth (CUDA events), against the link's nominal rate."""
    check_writable(json_path)
    from perfcore.experiments.transfer import parse_shape, parse_sizes

    size_list = parse_sizes(sizes)
    dirs = [d.strip() for d in direction.split(",") if d.strip()]
    bad = [d for d in dirs if d not in ("h2d", "d2h")]
    if bad or not dirs:
        raise click.BadParameter(f"directions are h2d and d2h, got {direction!r}", param_hint="--direction")
    shape = parse_shape(batch_shape) if batch_shape else None
    from perfcore._native import require_cuda

    require_cuda("perfcore transfer")  # exits 3 with the reason on a machine without a GPU
    from perfcore.report.plots import plot_transfer
    from perfcore.experiments.transfer import batch_cost, measure, nominal_link_gbps, summarize_curve

    out_dir = _out_dir(out, "transfer")
    curve = measure(size_list, dirs, repeats)
    link = nominal_link_gbps()
    doc = {"schema": "perfcore.experiments.transfer/1", "curve": curve.to_dict("records"), "link": link,
           "summary": summarize_curve(curve, link.get("gbps"))}
    if shape:
        doc["batch"] = batch_cost(shape, dtype)
    curve.to_csv(out_dir / "transfer.csv", index=False)
    plot_transfer(curve, out_dir / "transfer.png", link.get("gbps"))
    _dump(doc, out_dir / "transfer.json")
    echo = _echo_for(json_path)
    for k, v in doc["summary"].items():
        echo(f"  {k}: {v:.2f}")
    if shape:
        b = doc["batch"]
        echo(f"  batch {tuple(shape)} {dtype}: pinned {b['pinned_ms']:.2f} ms, pageable {b['pageable_ms']:.2f} ms; "
             f"non_blocking overlaps a kernel: pinned {b['overlap_pinned']}, pageable {b['overlap_pageable']}")
    click.echo(f"wrote {out_dir}/: transfer.json, transfer.csv, transfer.png", err=True)
    write_json(doc, json_path)


@cli.command("graph")
@click.argument("workload")
@click.option("--steps", type=int, default=50, show_default=True)
@out_option
@json_option
def graph_cmd(workload, steps, out, json_path) -> None:
    """Eager vs CUDA-Graph step time, launch overhead, and a same-result check against eager."""
    check_writable(json_path)
    if steps <= 0:
        raise click.BadParameter("must be > 0", param_hint="--steps")
    from perfcore._native import require_cuda

    require_cuda("perfcore graph")
    from perfcore.experiments.graph import graph_experiment

    out_dir = _out_dir(out, "graph")
    doc = graph_experiment(_load(workload), steps=steps)
    _dump(doc, out_dir / "graph.json")
    echo = _echo_for(json_path)
    lo = doc["launch_overhead"]
    echo(f"launch overhead: eager {lo['eager_host_us_per_launch']:.2f} us/launch (host), "
         f"graph {lo['graph_us_per_kernel']:.2f} us/kernel")
    if doc.get("captured"):
        c = doc["check"]
        echo(f"step: eager {doc['eager_step_ms']:.3f} ms, graphed {doc['graph_step_ms']:.3f} ms "
             f"({doc['speedup']:.2f}x); same results as eager: {c['match']} "
             f"(loss rel err {c['max_loss_rel_error']:.1e}, params {c['max_param_rel_error']:.1e})")
    else:
        echo(f"not captured: {doc['error']}")
    click.echo(f"wrote {out_dir}/graph.json", err=True)
    write_json(doc, json_path)
    if not doc.get("captured"):
        sys.exit(EXIT_FAILURE)


@cli.command("demo")
@out_option
@json_option
@click.option("--quick", is_flag=True, help="Fewer steps (for tests).")
def demo_cmd(out, json_path, quick) -> None:
    """health + run + diagnose on the built-in demo workload (real JPEGs, PIL decode, a small CNN)."""
    check_writable(json_path)
    out_dir = _out_dir(out, "demo")
    from perfcore.experiments.demo import run_demo

    doc = run_demo(out_dir, quick=quick, progress=Progress())
    click.echo(doc["_text"], err=json_path == "-")
    click.echo(f"wrote {out_dir}/: " + ", ".join(doc["files"]), err=True)
    write_json({k: v for k, v in doc.items() if not k.startswith("_")}, json_path)


def _version() -> str:
    from perfcore import __version__

    return __version__


def main() -> None:
    cli(prog_name="perfcore")


if __name__ == "__main__":
    main()
