"""The user's lines in words, for run.json's "lines" and "starvation": the user's function and line that
held the verdict's label (host, or load when the loader runs in the training process), with the syncing
calls counted there, loader starvation in numbers, and the sweep's DataLoader change (the call as it would
read at its file:line, and the patch). Text only; the figures are the document's."""

from __future__ import annotations

import os
import shlex
from typing import Any, Mapping

from perfcore.analysis.lines import (
    FunctionCost,
    LabelLines,
    LineCost,
    SiteCalls,
    enough_samples,
    min_samples,
    package_of,
)
from perfcore.analysis.loader_patch import PATCH_NAME
from perfcore.analysis.loader_plan import PlanKind
from perfcore.analysis.run_context import Loader, LoaderPlan
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms, fmt_share
from perfcore.analysis.verdict import report_evidence, steady_ms

__all__ = ["lines_text", "patch_text", "where", "BACKWARD_WORDS"]


BACKWARD_WORDS = {
    "activation_checkpointing": "activation checkpointing (forward recomputed in backward)",
    "requires_grad_on_frozen_layers": "gradients computed for layers meant to be frozen (requires_grad left on)",
    "scatter_or_index_backward": "indexing or embedding backward that scatters (index_add, dense embedding grads)",
    "backward_hooks": "hooks that run in backward",
}


def _printable(text: str) -> str:
    # A document may come from someone else: no control character reaches the terminal.
    return "".join(c if c.isprintable() else "?" for c in str(text))


def where(file: str, line: int, cwd: str | None = None) -> str:
    """file:line, relative to `cwd` (default: the current folder) when the file lies under it."""
    cwd = os.getcwd() if cwd is None else cwd
    rel = os.path.relpath(file, cwd) if os.path.isabs(file) else file
    return _printable(f"{file if rel.startswith('..') else rel}:{int(line)}")


SYNCING = ("item", "cpu", "tolist")  # read a value back to Python: on a GPU each waits for the device
LOOP_FUNCTIONS_PREFIX = "__"  # a Dataset's own methods (__getitem__, __call__ of a transform) are dunders


def _calls(calls: tuple[SiteCalls, ...]) -> str:
    # Fewer than one call a step is not what holds a step's time (and rounds to "0 calls").
    shown = [c for c in calls if float(c.per_step or 0) >= 1.0][:2]
    text = "".join(f"; {c.per_step:.0f} `.{_printable(c.method)}()` a step" for c in shown)
    if any(c.method in SYNCING for c in shown):
        text += ": keep on device, read every N steps"
    return text


def _span(lb: LabelLines, f: FunctionCost, cwd: str | None) -> str:
    # A function's total belongs to the function: its name and the lines its samples fell on.
    mine = [int(x.line) for x in lb.lines if (x.file, x.function) == (f.file, f.function)]
    lo, hi = min(mine + [int(f.line)]), max(mine + [int(f.line)])
    at = where(f.file, lo, cwd)
    return f"{_printable(f.function)} at {at}" + (f"-{hi}" if hi > lo else "")


def _site(x: LineCost | FunctionCost, cwd: str | None) -> str:
    fn = "" if x.function == "<module>" else f"{_printable(x.function)} at "  # the script's top level
    return f"{fn}{where(x.file, x.line, cwd)}"


def _loop_wait(r: RunReport, label: str, x: LineCost | FunctionCost) -> Loader | None:
    # Load time at a line of the loop itself (not a Dataset's method) is the loader's next(): the batch is
    # made in library code (a library Dataset, collate, workers), so the change is the DataLoader's settings.
    if label != "load" or not x.user or str(x.function).startswith(LOOP_FUNCTIONS_PREFIX):
        return None
    loader = r.training_loader
    return loader if loader and loader.site else None


# The loader plan's kinds that rule workers out (its words say why, in the loading line and --explain).
_NO_WORKERS = {k.value for k in (PlanKind.NO_FREE_CORE, PlanKind.CHEAPER_FETCH, PlanKind.MEASURED_NO_HELP)}


def _loader_text(loader: Loader, figure: str, plan: LoaderPlan | None) -> str:
    # The loop's own line only shows where it waits; the change is the loader's settings, at its line, and
    # it is the loader plan's change: this line never advises workers the plan has ruled out.
    workers = int(loader.num_workers or 0)
    kind = plan.kind if plan is not None else ""
    if kind in _NO_WORKERS:
        change = "cheaper batches, not workers"
    elif kind == PlanKind.PERSISTENT_WORKERS.value:
        change = "set persistent_workers=True"
    else:
        change = "add workers" if not workers else "more workers or cheaper batches"
    return f"DataLoader at {_printable(loader.site)} (num_workers={workers}): {figure} waiting; {change}"


def _library_line(x: LineCost, label: str, cwd: str | None) -> str | None:
    """A user's line that holds a label's time only because it calls into a library (trainer.train()):
    the share of the label at the deepest frame of that library where the time went, by file and line
    (its own lines are for py-spy or the library's profiler; perfcore does not guess its settings)."""
    inside = x.inside
    # Counted syncing calls at the line (as _calls shows them) are its change already: keep values on the device.
    if not inside or x.share < 0.5 or not x.user or _calls(x.calls):
        return None
    lib = package_of(inside[0])
    share = fmt_share(float(x.share) * float(x.inside_share or 0))
    of = _printable(lib) + ("'" if lib.endswith("s") else "'s")
    at = f"{os.path.basename(inside[0])}:{int(inside[2])}"
    return f"  try: {_site(x, cwd)}: {share} of {label} is in {of} {_printable(inside[1])} ({_printable(at)})"


def _try_line(r: RunReport, lb: LabelLines, label: str, cwd: str | None) -> str:
    # The label's ms are the breakdown's (the table above); the samples give a site's share of them (a
    # sampler starved of CPU sees less time, not a different split). A site is sized only when its samples
    # are enough for its share (enough_samples); else the function, else the counts alone.
    # The label's ms as the table above quotes it (the verdict's steady estimate, outliers set apart).
    label_ms = steady_ms(report_evidence(r)).get(label) or lb.ms_per_step
    n = int(lb.samples or 0)
    f = lb.functions[0]
    x = lb.lines[0] if lb.lines else LineCost(f.file, f.function, f.line, f.ms_per_step, f.share, f.samples, f.user)
    loader = _loop_wait(r, label, x)

    def sized(share: float, note: str = "") -> str:
        # The sample counts stay in --explain and report.html: the short line keeps the figure and its share.
        return f"{fmt_ms(share * label_ms)} a step ({fmt_share(share)} of {label}{note})"

    if enough_samples(x.share, n):
        if loader:
            return f"  try: {_loader_text(loader, sized(x.share), r.loader_plan)}"
        inside = _library_line(x, label, cwd)
        if inside:
            return inside
        return f"  try: {_site(x, cwd)}: {sized(x.share)}{_calls(x.calls)}"
    calls = tuple(c for y in lb.lines if (y.file, y.function) == (f.file, f.function) for c in y.calls)
    if enough_samples(f.share, n):
        return f"  try: {_span(lb, f, cwd)}: {sized(f.share, '; no one line stands out')}{_calls(calls)}"
    counted = _calls(calls)
    # With counted calls the line's action is theirs; the sample counts would only push it past the width.
    few = (
        "too few samples to time it"
        if counted
        else f"too few samples to time it ({f.samples} of {n} {label}; a time needs {min_samples(f.share)}, "
        "a longer run has more)"
    )
    # Without counted calls there is no change to make at the line: a caveat, said as a note.
    return f"  {'try' if counted else 'note'}: {_span(lb, f, cwd)}: {few}{counted}"


def lines_text(r: RunReport, cwd: str | None = None) -> list[str]:
    out = []
    causes = r.verdict.named
    label = causes[0].label if causes else None
    lb = r.lines.label(label) if r.lines is not None and label in ("host", "load") else None
    if lb is not None and lb.functions:
        out.append(_try_line(r, lb, label, cwd))
    out += _compute_text(r)
    s = r.starvation
    if s is not None and s.starved:
        out.append(
            f"  steps that waited on the loader: {fmt_share(s.share)} ({s.starved} of {s.steps}, "
            f"waits over {fmt_ms(s.threshold_ms)}): their p50 wait {fmt_ms(s.p50_wait_ms)}, "
            f"p95 {fmt_ms(s.p95_wait_ms)}, "
            f"longest run {s.longest_run} steps from step {s.longest_run_first_step}"
        )
    return out


def _compute_text(r: RunReport) -> list[str]:
    facts = r.compute_facts
    out = []
    o = facts.optimizer if facts is not None else None
    if o:
        lo, hi = o.saved_ms
        saves = f"saves {fmt_ms(lo)}-{fmt_ms(hi)} a step" if o.measured else f"saves up to {fmt_ms(hi)} a step"
        out.append(
            f"  try: {_printable(o.snippet)}: {saves} (the optimizer: {fmt_ms(o.optimizer_ms)}, "
            f"{fmt_share(o.share)} of the step)"
        )
    b = facts.backward if facts is not None else None
    if b:
        why = "; ".join(BACKWARD_WORDS.get(c, _printable(c)) for c in b.likely[:3])
        out.append(
            f"  backward is {b.ratio:.1f}x forward ({fmt_ms(b.backward_ms)} against "
            f"{fmt_ms(b.forward_ms)}; ~2x is usual, {fmt_ms(b.excess_ms)} a step above it): "
            f"look for {why}"
        )
    return out


def _no_patch(p: Mapping[str, Any]) -> str:
    """Why the sweep wrote no patch, from its reason (an older document's reason is its words)."""
    reason = p.get("reason")
    if reason == "no_site":
        return "no DataLoader call site or no best configuration"
    if reason == "own_is_best":
        return "the best configuration is the script's own"
    if reason == "within_noise":
        x, noise = p.get("speedup"), p.get("noise_share")
        ahead = f" ({float(x):.2f}x its rate, noise +-{100 * float(noise):.0f}%)" if x and noise is not None else ""
        return f"the best configuration is no faster than the script's own beyond the runs' noise{ahead}"
    if reason == "not_under_cwd":
        return f"the DataLoader at {p.get('site')} is not a file under {p.get('cwd')}"
    if reason == "cannot_patch":
        return str(p.get("error") or "")
    if reason == "failed_try":
        return f"not offered: {p.get('error') or 'the patched script failed its try'}"
    return str(reason or "")


def patch_text(patch: Mapping[str, Any] | None, folder: str = "<sweep folder>") -> list[str]:
    """The sweep's DataLoader change: the call as it would read at its file:line, and the patch to apply."""
    if not patch:
        return []
    if patch.get("status") != "written":
        return [f"  no DataLoader patch: {_printable(_no_patch(patch))}"]
    if patch.get("patch") != PATCH_NAME:  # a document's name is never a path handed to `git apply`
        return [
            f"  no DataLoader patch: the document names it {_printable(str(patch.get('patch'))[:60])!r}, "
            f"not {PATCH_NAME}"
        ]
    return [
        f"  change at {_printable(patch['at'])}: {_printable(patch['call'])}",
        f"  git apply {_printable(shlex.quote(os.path.join(folder, patch['patch'])))}"
        + ("  (the call also passes **kwargs: check they do not set these)" if patch.get("through_kwargs") else ""),
    ]
