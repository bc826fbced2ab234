"""report.html's sections for run.json's "lines" and "starvation": the user's lines that held each label's
time (host first, then load when the loader ran in the training process), and the loader's starvation in
numbers. HTML only; the figures are the document's, escaped for the page."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from perfcore.analysis.lines import LabelLines, SiteCalls, enough_samples
from perfcore.analysis.run_report import RunReport
from perfcore.report.html_parts import dur, esc, pct, table

__all__ = ["lines_section", "starvation_block", "SHOWN_LABELS"]

SHOWN_LABELS = ("host", "load")  # the labels a user's line explains; compute's lines are the model's call
TOP_ROWS = 8


def _where(file: Any, line: Any) -> str:
    # The file's name and line, the whole path on hover: a path from a document is only ever text here.
    name = PurePath(str(file)).name or str(file)
    return f"<span title='{esc(file)}'>{esc(name)}:{esc(line)}</span>"


def _calls(calls: tuple[SiteCalls, ...]) -> str:
    out = [
        f"{float(c.per_step or 0):.0f} <code>.{esc(c.method)}()</code>"
        for c in calls[:2]
        if float(c.per_step or 0) >= 1.0  # rarer calls round to "0"
    ]
    return ", ".join(out) + (" a step" if out else "")


def _label_table(lb: LabelLines, label_ms: float) -> str:
    # Each line's ms are its share of the label's ms in the breakdown: a sampler starved of CPU sees less
    # time, not a different split (as the terminal's "try" line says it). A line whose share the label's
    # samples cannot pin down (enough_samples) gets no ms figure.
    n = int(lb.samples or 0)
    rows = []
    for x in lb.lines[:TOP_ROWS]:
        share = float(x.share or 0)
        fn = esc(x.function) + ("" if x.user else " <span class='muted'>(library)</span>")
        rows.append(
            [
                fn,
                _where(x.file, x.line),
                dur(share * label_ms) if enough_samples(share, n) else "<span class='muted'>few samples</span>",
                f"{pct(share, 1)} <span class='hbar' style='background:#a8a8a8;width:{80 * share:.0f}px'></span>",
                esc(x.samples),
                _calls(x.calls),
            ]
        )
    return table(["function", "line", "ms a step", "share", "samples", "syncing calls"], rows, {2, 3, 4})


def _loads_in_process(r: RunReport) -> bool:
    # With workers, the training thread's load samples are only its wait in the loop's `for` line: the
    # batch is made elsewhere. A loader perfcore did not see (timer.load) runs where it is called.
    return not r.loaders or any(not x.num_workers for x in r.loaders)


def lines_section(r: RunReport) -> str:
    """The top lines per label, with ms per step and share; "" when the run sampled no lines."""
    lines = r.lines
    if lines is None:
        return ""
    names = SHOWN_LABELS if _loads_in_process(r) else ("host",)
    shown = [lb for name in names for lb in lines.labels if lb.label == name and lb.lines]
    if not shown:
        return ""
    parts = [
        "<h2>Your code's lines</h2>",
        f"<div class='muted'>The training thread's stack sampled every {esc(lines.interval_ms)} ms "
        f"({esc(lines.samples)} samples over {esc(lines.steps)} steps); library frames are counted "
        "at the line of your code that called them."
        + (" Host time by function is drawn over the run below." if lines.timeline is not None else "")
        + "</div>",
    ]
    for lb in shown:
        name = str(lb.label)
        label_ms = float(r.breakdown_ms[name] or 0)
        parts.append(f"<h3>{esc(name)}: {dur(label_ms)} a step</h3>" + _label_table(lb, label_ms))
    return "".join(parts)


def starvation_block(r: RunReport) -> str:
    """The loader's starvation in numbers (share of steps that waited, p50/p95 wait, the longest run)."""
    s = r.starvation
    if s is None or not s.steps:
        return ""
    if not s.starved:
        return f"<p>No step waited for data longer than {dur(s.threshold_ms)} (of {esc(s.steps)} measured steps).</p>"
    first = s.longest_run_first_step
    rows = [
        [
            f"{pct(s.share, 1)} ({esc(s.starved)} of {esc(s.steps)})",
            dur(s.p50_wait_ms),
            dur(s.p95_wait_ms),
            f"{esc(s.longest_run)} steps" + (f" from step {esc(first)}" if first is not None else ""),
            dur(s.load_ms_per_step),
        ]
    ]
    return "<h3>Loader starvation</h3>" + table(
        [
            f"steps that waited > {dur(s.threshold_ms)}",
            "p50 wait",
            "p95 wait",
            "longest starved run",
            "mean wait (all steps)",
        ],
        rows,
        {1, 2, 4},
    )
