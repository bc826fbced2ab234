"""IPython/Colab: `%load_ext perfcore`, then a cell starting with `%%perfcore [--steps N] [--warmup W]`
runs with the same zero-code instrumentation as `perfcore run`, in-process, and shows the report
inline (HTML table and the per-step plot) where the frontend shows HTML (a notebook's kernel), and as
`perfcore run`'s text report, with its status line, where it shows only text (terminal IPython)."""

from __future__ import annotations

import argparse
import shlex
import shutil
import tempfile
from pathlib import Path

__all__ = ["load_ipython_extension", "run_cell", "shows_html"]


def run_cell(cell: str, user_ns: dict, steps: int | None = None, warmup: int = 5):
    """Runs `cell` instrumented and returns the perfcore.run/1 result (a RunResult) and its timer. Nothing
    is set in the notebook's environment, and no folder is left behind."""
    from perfcore.run.protocol import ChildConfig

    # The cell's own folder, for its progress file (the live status line): removed when the cell ends.
    run_dir = Path(tempfile.mkdtemp(prefix="perfcore-cell-"))
    try:
        return _run_in(run_dir, cell, user_ns, ChildConfig(run_dir=str(run_dir), steps=steps or 0, warmup=warmup))
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _run_in(run_dir: Path, cell: str, user_ns: dict, config):
    from perfcore.run.child import instrument

    if instrument.STATE is None:
        # In-process: no exit handlers or signal handlers (the notebook owns those).
        instrument.activate(config, process_hooks=False)
    inst = instrument.STATE
    # --steps ends the cell as `perfcore run --steps` ends a script: SystemExit(0) at the step,
    # never a private exception a cell's `except BaseException` would see; only the cell's threads.
    inst.new_cell(config, in_cell=True)
    from perfcore.run.status import LiveStatus, NotebookStatus

    # The live status line: under the cell in a notebook, on stderr in a terminal (as perfcore run's).
    status = (NotebookStatus(run_dir) if shows_html() else LiveStatus(run_dir)).start()
    try:
        exec(compile(cell, "<perfcore cell>", "exec"), user_ns)
    except SystemExit as e:
        if not (inst.ending.stop_requested and e.code == 0):
            raise  # the cell's own sys.exit: IPython's to show
    finally:
        status.stop()
        timer, stop_note = inst.end_cell()
    from perfcore.errors import UsageError

    if timer is None:
        raise UsageError("the cell ran no training step (no DataLoader iterated, no module called)")
    source = inst.finish_sources()
    timer.engine.close_open_phases()
    if not timer.engine.boundaries:
        raise UsageError("the cell ran no complete step (no optimizer step, backward, batch or second module call)")
    from perfcore.analysis.advice import advise_run
    from perfcore.analysis.run_report import RunReport
    from perfcore.timing import RunResult

    # Evaluation passes in the cell are rows of their own, set apart from the training steps' statistics
    # as `perfcore run` sets them apart.
    facts = timer.engine.document(evaluation_rows=list(inst.eval_rows))
    facts["step_source"] = source
    if stop_note:
        facts["notes"] = list(facts.get("notes") or []) + [stop_note]
    decision = advise_run(facts, zero_code=True)  # the cell is the user's unmodified code: no perfcore calls
    timer.close()
    return RunResult.of(RunReport.of(facts, decision)), timer


def shows_html(ipython=None) -> bool:
    """Whether the IPython frontend renders HTML outputs (a notebook's kernel) or only text (terminal
    IPython, whose shell formats text/plain alone): there an HTML object prints as its repr. True outside
    IPython, where nothing is displayed."""
    if ipython is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return True
        ipython = get_ipython()
    formatter = getattr(ipython, "display_formatter", None)
    return formatter is None or "text/html" in formatter.active_types


def load_ipython_extension(ipython) -> None:
    from IPython.core.magic import register_cell_magic

    @register_cell_magic("perfcore")
    def perfcore_magic(line, cell):
        import sys

        from perfcore.errors import PerfcoreError, UsageError
        from perfcore.run.options import MAX_COUNT, number

        p = argparse.ArgumentParser(
            prog="%%perfcore", add_help=False, description="Run the cell with perfcore's zero-code instrumentation."
        )
        p.add_argument("--steps", default=None, help="stop the cell after N measured steps")
        p.add_argument("--warmup", default="5", help="steps at the start reported apart (default 5)")
        if {"-h", "--help"} & set(line.split()):
            print(p.format_help())
            return None

        def refuse(message):  # argparse would print usage and raise SystemExit into the notebook
            raise UsageError(f"%%perfcore: {message}")

        p.error = refuse
        try:
            args = p.parse_args(shlex.split(line))
            steps = None if args.steps is None else number(args.steps, "--steps", kind=int, low=1, high=MAX_COUNT)
            warmup = number(args.warmup, "--warmup", kind=int, low=0, high=MAX_COUNT)
        except (PerfcoreError, ValueError) as e:  # ValueError: shlex on an unclosed quote
            print(f"perfcore: error: {e}", file=sys.stderr)
            return None
        try:
            res, timer = run_cell(cell, ipython.user_ns, steps=steps, warmup=warmup)
        except PerfcoreError as e:  # a cell with no step: one line under the cell, not a traceback
            print(f"perfcore: {e}", file=sys.stderr)
            return None
        if not shows_html(ipython):
            print(str(res), file=sys.stderr)  # perfcore run's text report, on stderr as there
            return None
        from IPython.display import HTML, display

        from perfcore.report.html import render_html

        display(HTML(render_html(res, timer.summary())))  # report.html's body: verdict, advice, binned plot
        return None
