"""report.html's sections for run.json's "lines" and "starvation": the user's lines that held each label's
time (host first, then load when the loader ran in the training process), and the loader's starvation in
numbers. HTML only; the figures are the document's, escaped for the page."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, Mapping

from perfcore.analysis.lines import enough_samples
from perfcore.report.html_parts import esc, dur, pct, table

__all__ = ["lines_section", "starvation_block", "SHOWN_LABELS"]

SHOWN_LABELS = ("host", "load")  # the labels a user's line explains; compute's lines are the model's call
TOP_ROWS = 8


def _where(file: Any, line: Any) -> str:
    # The file's name and line, the whole path on hover: a path from a document is only ever text here.
    name = PurePath(str(file)).name or str(file)
    return f"<span title='{esc(file)}'>{esc(name)}:{esc(line)}</span>"


def _calls(calls: Any) -> str:
    out = [
        f"{float(c.get('per_step') or 0):.0f} <code>.{esc(c.get('method', '?'))}()</code>"
        for c in (calls or [])[:2]
        if isinstance(c, Mapping) and float(c.get("per_step") or 0) >= 1.0  # rarer calls round to "0"
    ]
    return ", ".join(out) + (" a step" if out else "")


def _label_table(lb: Mapping[str, Any], label_ms: float) -> str:
    # Each line's ms are its share of the label's ms in the breakdown: a sampler starved of CPU sees less
    # time, not a different split (as the terminal's "try" line says it). A line whose share the label's
    # samples cannot pin down (enough_samples) gets no ms figure.
    n = int(lb.get("samples") or 0)
    rows = []
    for x in (lb.get("lines") or [])[:TOP_ROWS]:
        if not isinstance(x, Mapping):
            continue
        share = float(x.get("share") or 0)
        fn = esc(x.get("function", "?")) + ("" if x.get("user", True) else " <span class='muted'>(library)</span>")
        rows.append(
            [
                fn,
                _where(x.get("file", "?"), x.get("line", "?")),
                dur(share * label_ms) if enough_samples(share, n) else "<span class='muted'>few samples</span>",
                f"{pct(share, 1)} <span class='hbar' style='background:#a8a8a8;width:{80 * share:.0f}px'></span>",
                esc(x.get("samples", "")),
                _calls(x.get("calls")),
            ]
        )
    return table(["function", "line", "ms a step", "share", "samples", "syncing calls"], rows, {2, 3, 4})


def _loads_in_process(doc: Mapping[str, Any]) -> bool:
    # With workers, the training thread's load samples are only its wait in the loop's `for` line: the
    # batch is made elsewhere. A loader perfcore did not see (timer.load) runs where it is called.
    loaders = [x for x in doc.get("loaders") or [] if isinstance(x, Mapping)]
    return not loaders or any(not x.get("num_workers") for x in loaders)


def lines_section(doc: Mapping[str, Any]) -> str:
    """The top lines per label, with ms per step and share; "" when the run sampled no lines."""
    lines = doc.get("lines") or {}
    if not isinstance(lines, Mapping):
        return ""
    labels = [lb for lb in lines.get("labels") or [] if isinstance(lb, Mapping)]
    names = SHOWN_LABELS if _loads_in_process(doc) else ("host",)
    shown = [lb for name in names for lb in labels if lb.get("label") == name and lb.get("lines")]
    if not shown:
        return ""
    breakdown = doc.get("breakdown_ms") or {}
    parts = [
        "<h2>Your code's lines</h2>",
        f"<div class='muted'>The training thread's stack sampled every {esc(lines.get('interval_ms'))} ms "
        f"({esc(lines.get('samples'))} samples over {esc(lines.get('steps'))} steps); library frames are counted "
        "at the line of your code that called them."
        + (" Host time by function is drawn over the run below." if lines.get("timeline") else "")
        + "</div>",
    ]
    for lb in shown:
        name = str(lb.get("label"))
        label_ms = float(breakdown.get(name, lb.get("ms_per_step")) or 0)
        parts.append(f"<h3>{esc(name)}: {dur(label_ms)} a step</h3>" + _label_table(lb, label_ms))
    return "".join(parts)


def starvation_block(doc: Mapping[str, Any]) -> str:
    """The loader's starvation in numbers (share of steps that waited, p50/p95 wait, the longest run)."""
    s = doc.get("starvation") or {}
    if not isinstance(s, Mapping) or not s.get("steps"):
        return ""
    if not s.get("starved"):
        return (
            f"<p>No step waited for data longer than {dur(s.get('threshold_ms'))} "
            f"(of {esc(s.get('steps'))} measured steps).</p>"
        )
    first = s.get("longest_run_first_step")
    rows = [
        [
            f"{pct(s.get('share'), 1)} ({esc(s.get('starved'))} of {esc(s.get('steps'))})",
            dur(s.get("p50_wait_ms")),
            dur(s.get("p95_wait_ms")),
            f"{esc(s.get('longest_run'))} steps" + (f" from step {esc(first)}" if first is not None else ""),
            dur(s.get("load_ms_per_step")),
        ]
    ]
    return "<h3>Loader starvation</h3>" + table(
        [
            f"steps that waited > {dur(s.get('threshold_ms'))}",
            "p50 wait",
            "p95 wait",
            "longest starved run",
            "mean wait (all steps)",
        ],
        rows,
        {1, 2, 4},
    )
