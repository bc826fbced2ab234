"""The terminal's lines for run.json's "lines" and "starvation": the user's function and line that held
the verdict's label (host, or load when the loader runs in the training process), with the syncing calls
counted there, and loader starvation in numbers. Text only; the figures are the document's."""

from __future__ import annotations

import os
from typing import Any, Mapping

from perfcore.analysis.units import fmt_ms, fmt_share

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


def _calls(calls: list[Mapping[str, Any]]) -> str:
    return "".join(f", {c['per_step']:.0f} `.{_printable(c['method'])}()` calls a step" for c in calls[:2])


def lines_text(doc: Mapping[str, Any], cwd: str | None = None) -> list[str]:
    out = []
    causes = (doc.get("verdict") or {}).get("causes") or []
    label = causes[0].get("label") if causes else None
    lines = doc.get("lines") or {}
    for lb in lines.get("labels") or []:
        if lb.get("label") != label or label not in ("host", "load") or not lb.get("functions"):
            continue
        f = lb["functions"][0]
        at = next((x for x in lb.get("lines") or [] if x["file"] == f["file"] and x["line"] == f["line"]), None)
        # The label's ms are the breakdown's (the table above); the samples give the function's share of them
        # (a sampler starved of CPU sees less time, not a different split).
        label_ms = (doc.get("breakdown_ms") or {}).get(label, lb["ms_per_step"])
        fn = "" if f["function"] == "<module>" else f"{_printable(f['function'])} at "  # the script's top level
        out.append(
            f"  try: {fn}{where(f['file'], f['line'], cwd)}: "
            f"{fmt_ms(f['share'] * label_ms)} of {fmt_ms(label_ms)} {label} a step "
            f"({fmt_share(f['share'])}, {lb['samples']} samples){_calls(at['calls'] if at else [])}"
        )
    out += _compute_text(doc)
    s = doc.get("starvation") or {}
    if s.get("starved"):
        out.append(
            f"  loader starved on {fmt_share(s['share'])} of steps ({s['starved']} of {s['steps']}, "
            f"waits over {fmt_ms(s['threshold_ms'])}): p50 wait {fmt_ms(s['p50_wait_ms'])}, "
            f"p95 {fmt_ms(s['p95_wait_ms'])}, "
            f"longest run {s['longest_run']} steps from step {s['longest_run_first_step']}"
        )
    return out


def _compute_text(doc: Mapping[str, Any]) -> list[str]:
    facts = doc.get("compute_facts") or {}
    out = []
    o = facts.get("optimizer")
    if o:
        lo, hi = o["saved_ms"]
        saves = f"saves {fmt_ms(lo)}-{fmt_ms(hi)} a step" if o["measured"] else f"saves up to {fmt_ms(hi)} a step"
        out.append(
            f"  try: {_printable(o['snippet'])}: the optimizer is {fmt_share(o['share'])} of the step "
            f"({fmt_ms(o['optimizer_ms'])}); its {o['keyword']} form {saves}"
        )
    b = facts.get("backward")
    if b:
        why = "; ".join(BACKWARD_WORDS.get(c, _printable(c)) for c in b["likely"][:3])
        out.append(
            f"  backward is {b['ratio']:.1f}x forward ({fmt_ms(b['backward_ms'])} against "
            f"{fmt_ms(b['forward_ms'])}; ~2x is usual, {fmt_ms(b['excess_ms'])} a step above it): "
            f"look for {why}"
        )
    return out


def patch_text(patch: Mapping[str, Any] | None, folder: str = "<sweep folder>") -> list[str]:
    """The sweep's DataLoader change: the call as it would read at its file:line, and the patch to apply."""
    if not patch:
        return []
    if patch.get("status") != "written":
        return [f"  no DataLoader patch: {_printable(patch.get('reason', ''))}"]
    return [
        f"  change at {_printable(patch['at'])}: {_printable(patch['call'])}",
        f"  git apply {_printable(os.path.join(folder, patch['patch']))}"
        + ("  (the call also passes **kwargs: check they do not set these)" if patch.get("through_kwargs") else ""),
    ]
