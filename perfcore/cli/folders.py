"""The commands that read folders and the machine: report, compare and merge of run folders, and env."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from perfcore.cli.shared import EXIT_FAILURE, Number, Results, UserPath, results
from perfcore.safe_text import clean
from perfcore.run.parent.folder import check_target

__all__ = ["report_cmd", "compare_cmd", "merge_cmd", "env_cmd"]


@click.command("report")
@click.argument("run_dir", type=UserPath(exists=True, file_okay=False))
@click.option("--html", "html", is_flag=True, help="Also rewrite the folder's report.html.")
@click.option("--explain", is_flag=True, help="The whole report: every interval, caveat and finding.")
@results("report", out=False)
def report_cmd(res: Results, run_dir, html, explain) -> None:
    """Re-render the report and plots of a run folder.

    RUN_DIR: a folder that run, health, diagnose, sweep, demo or merge wrote. Prints its report and
    rewrites its breakdown.png (and its report.html with --html); nothing else in it changes.
    """
    from perfcore.report.plots import plot_breakdown
    from perfcore.report.words.verdict import verdict_short
    from perfcore.analysis.reader import load_run
    from perfcore.report.terminal import render_brief, render_text

    from perfcore.errors import ResultWriteError

    folder = Path(run_dir)
    check_target(res.json_path, [folder])
    if (folder / "demo.json").exists() or (not (folder / "run.json").exists() and not (folder / "parts").is_dir()):
        from perfcore.report.stage_text import stage_text

        # A demo, health, diagnose or sweep folder: its own report (a demo's, all three stages, not its run's).
        shown = stage_text(folder, explain)
        if shown is not None:
            result, text, name = shown
            res.echo(clean(text))
            if html:
                from perfcore.report.html import write_folder_report

                files = sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
                write_folder_report(folder, f"perfcore {name}", result, text, files)
                res.done(result.to_dict(), ["report.html"], folder)
            else:
                res.done(result.to_dict())
            return
    if not (folder / "run.json").exists():
        from perfcore.run.parent.refinish import finish_unfinished

        # perfcore was stopped before it wrote run.json; the parts hold what it needs to.
        finish_unfinished(folder)
        click.echo(
            f"perfcore report: {folder} was not finished; finished it from the parts its processes wrote", err=True
        )
    run, steps = load_run(folder)
    res.echo(clean(render_text(run) if explain else render_brief(run, folder)))
    doc = run.to_dict()
    written = []
    try:
        if len(steps) > 0:  # a run that saw no step has nothing to plot
            plot_breakdown(steps, folder / "breakdown.png", title=verdict_short(run.verdict))
            written.append("breakdown.png")
        if html:
            from perfcore.report.html import write_report

            write_report(folder, run, steps)
            written.append("report.html")
    except ResultWriteError as e:
        # The report is shown; only the refreshed files could not be saved (a read-only copy).
        # jsonio's advice (free space, choose --out) is for a run; here the folder just cannot be changed.
        click.echo(
            f"perfcore report: the report is above, but its files were not rewritten: {str(e).split(';')[0]}", err=True
        )
        res.done(doc)
        return
    res.done(doc, written, folder)


@click.command("compare")
@click.argument("run_a", type=UserPath(exists=True, file_okay=False))
@click.argument("run_b", type=UserPath(exists=True, file_okay=False))
@click.option(
    "--fail-above",
    type=Number(float),
    help="Exit 1 when B's step time is more than PCT percent slower than A's, steady or mean (a CI gate).",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    help="Also write the two runs side by side as a self-contained page at PATH.",
)
@results("compare", out=False)
def compare_cmd(res: Results, run_a, run_b, fail_above, html_path) -> None:
    """Per-label and per-kernel-category change from RUN_A to RUN_B, and the speedup.

    RUN_A, RUN_B: folders that perfcore run wrote. Writes nothing but what --html and --json name.
    """
    from perfcore.analysis.compare import compare_runs
    from perfcore.report.terminal import render_compare
    from perfcore.analysis.reader import load_run

    check_target(res.json_path, [run_a, run_b])
    check_target(html_path, [run_a, run_b], page=True)
    a, _ = load_run(Path(run_a), measured=True)
    b, _ = load_run(Path(run_b), measured=True)
    doc = compare_runs(a, b)
    res.echo(clean(render_compare(doc)))
    if html_path is not None:
        from perfcore.report.html import write_compare_report

        page = write_compare_report(Path(html_path).expanduser(), doc, (run_a, run_b))
        res.echo(f"wrote {page}")
    res.done(doc.to_dict())
    steady, mean = doc.step_time_change_pct, doc.mean_change_pct
    # Written so that a change that is not a number fails the gate rather than passing it.
    if fail_above is not None and not doc.regression_pct <= fail_above:
        which = f"step time {steady:+.1f}%" if not steady <= fail_above else f"mean step time {mean:+.1f}%"
        outliers = "" if not steady <= fail_above else f" (steady steps {steady:+.1f}%: the outlier steps slowed)"
        click.echo(f"perfcore: regression: {which} > {fail_above:g}%{outliers}", err=True)
        sys.exit(EXIT_FAILURE)


@click.command("merge")
@click.argument("dirs", nargs=-1, required=True, type=UserPath(exists=True, file_okay=False))
@results("merge")
def merge_cmd(res: Results, dirs) -> None:
    """Merge run folders written on different nodes of one job (each ran perfcore run -- torchrun ...).

    DIRS: the nodes' run folders (read, never changed). Writes the job's run folder (--out): run.json,
    steps.csv, trace.json, the plots and report.html.
    """
    from perfcore.report.terminal import render_text
    from perfcore.run.parent.refinish import merge_dirs

    check_target(res.json_path, dirs)
    # merge_dirs makes the merged folder only once the parts are read and found to be one job's.
    run, out = merge_dirs([Path(d) for d in dirs], Path(res.out) if res.out else None)
    res.echo(clean(render_text(run)))
    res.done(run.to_dict(), list(run.files), out)


_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "info": "info"}
_COLOR = {"ok": "green", "warn": "yellow", "fail": "red", "info": None}


@click.command("env")
@results("env", out=False)
def env_cmd(res: Results) -> None:
    """Build info and a non-destructive check of this machine (GPU, CPU, limits, versions).

    No target. Writes nothing but what --json names.
    """
    from perfcore import __version__
    from perfcore.capture.environment import environment_report
    from perfcore.report.words import with_words

    report = with_words(environment_report())
    b = report["build"]
    res.echo(f"perfcore {__version__}  build: {b.get('mode')} mode" + (f" ({b['reason']})" if b.get("reason") else ""))
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
