"""Findings beside the verdict into words: a probable leak or memory pressure (analysis.memory_findings'
figures) as a sentence and the advice that answers it; the evaluation passes set apart from the
training steps (attribution.evaluation_finding); how several optimizers stepped (run.child.part_writer's
optimizer_order). A document written before the figures were kept has
its words stored: they are read back as they are."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.units import fmt_ms, fmt_share

__all__ = ["memory_words", "memory_sentence", "evaluation_sentence", "optimizer_order_sentence"]

_ADVICE = {
    "memory_leak": "Something keeps tensors alive across steps: a loss or output appended to a list without "
    ".item() or .detach(), a growing cache, or a graph kept by retain_graph=True.",
    "memory_pressure": "Each retry synchronizes and frees cached blocks: lower the batch size, use activation "
    "checkpointing or bf16, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
    "memory_near_capacity": "One larger batch or a longer sequence will not fit: keep headroom, or cut activation "
    "memory (checkpointing, bf16) before scaling up.",
}
# Figures of another shape (another version's, an edited file) are not said: the stored words are.
_MALFORMED = (KeyError, TypeError, ValueError, ZeroDivisionError)


def memory_words(f: Mapping[str, Any]) -> tuple[str, str]:
    """A memory finding's (sentence, advice) from its figures."""
    what = "device memory" if f.get("kind", "cuda_allocated") == "cuda_allocated" else "process memory (RSS)"
    fid = f["id"]
    if fid == "memory_leak":
        sentence = (
            f"probable leak: {what} rises {f['bytes_per_step'] / 2**20:.2f} MB per step from step {f['from_step']} "
            f"({f['growth_bytes'] / 2**20:.0f} MB over {f['over_steps']} steps, a straight-line "
            f"fit explains {100 * f['r2']:.0f}% of it)"
        )
    elif fid == "memory_pressure":
        sentence = f"memory pressure: the CUDA caching allocator had to free and retry {f['retries']} time(s)"
    else:
        peak, cap = f["peak_bytes"], f["capacity_bytes"]
        sentence = (
            f"memory pressure: peak {what} {peak / 2**30:.1f} GB is {100 * peak / cap:.0f}% of {cap / 2**30:.1f} GB"
        )
    return sentence, _ADVICE[fid]


def memory_sentence(f: Mapping[str, Any]) -> str:
    """The finding's sentence: from its figures, else the words it stored."""
    if "sentence" in f and "from_step" not in f and "retries" not in f and "capacity_bytes" not in f:
        return str(f["sentence"])  # an old document: the words are all it kept
    try:
        return memory_words(f)[0]
    except _MALFORMED:
        return str(f.get("sentence") or "")


def evaluation_sentence(ev: Mapping[str, Any]) -> str:
    """The evaluation passes' cost, from their figures, else the words an old document stored."""
    try:
        n, per = int(ev["passes"]), float(ev["ms_per_pass"])
        lo, hi = float(ev.get("min_ms_per_pass", per)), float(ev.get("max_ms_per_pass", per))
        # Passes that differ (a last pass over fewer batches, a first one that warms up) are said as their
        # range: one mean "each" hid 0.40, 2.39 and 5.19 s behind "3.82 s each".
        size = f"of {fmt_ms(per)} each" if hi <= 1.25 * lo else f"of {fmt_ms(lo)} to {fmt_ms(hi)} ({fmt_ms(per)} mean)"
        return (
            f"{n} evaluation pass(es) {size} took "
            f"{fmt_share(float(ev['share_of_wall']))} of the wall time ({fmt_ms(float(ev['total_ms']))} in all); "
            "they are reported apart and are not in the step time, the breakdown or the verdict"
        )
    except _MALFORMED:
        return str(ev.get("sentence") or "") if isinstance(ev.get("sentence"), str) else ""


_ORDER = {
    "sequence": "stepping in sequence, one stage after the other (layer-wise training, an LR finder before "
    "training): the step clock passed to each in turn, so every stage's steps are rows",
    "interleaved": "a step ends at the step of the optimizer that is stepping (one that steps twice with no "
    "step of the other between takes over), so an optimizer that steps once after it in an iteration (a GAN's "
    "generator after its discriminator) lands in the next row: row k holds its step of iteration k-1",
}


def optimizer_order_sentence(order: str, optimizers: int) -> str:
    """Several optimizers, by how they stepped (sequence, interleaved or both), for the step source's line."""
    if order == "both":
        return f"{optimizers} optimizers, some {_ORDER['sequence']}; within a stage, {_ORDER['interleaved']}"
    return f"{optimizers} optimizers " + (
        _ORDER[order] if order == "sequence" else f"stepping in one iteration: {_ORDER[order]}"
    )
