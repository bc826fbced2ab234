"""Findings beside the verdict into words: a probable leak or memory pressure (analysis.memory_findings'
figures) as a sentence and the advice that answers it; the evaluation passes set apart from the
training steps (attribution.evaluation_finding); how several optimizers stepped (run.child.part_writer's
optimizer_order) and the step source said once. A document written before the figures were kept has
its words stored: they are read back as they are."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.units import fmt_ms, fmt_share

__all__ = [
    "memory_words",
    "memory_sentence",
    "evaluation_sentence",
    "optimizer_order_sentence",
    "other_steps_sentence",
    "step_source_words",
]

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


def other_steps_sentence(doc: Mapping[str, Any]) -> str | None:
    """Where several optimizers stepped in one iteration (a GAN's D and G): the other optimizers' steps
    against the rows. The count is said to match the script's iterations only when every other step fits
    one to a row; None when no other optimizer stepped inside the rows (or a document before the facts)."""
    seen = doc.get("seen") if isinstance(doc.get("seen"), Mapping) else {}
    n, others, handovers = seen.get("optimizers"), seen.get("other_optimizer_steps"), seen.get("optimizer_handovers")
    if doc.get("step_source") != "optimizer" or not isinstance(n, int) or n < 2 or not isinstance(others, int):
        return None
    if not others:
        return None
    rows = int(doc.get("steps") or 0) + int(doc.get("warmup_steps") or 0)
    if others == rows and not handovers:
        return "one per row: the count matches the script's iterations"
    return f"{others} steps of other optimizers against {rows} rows: they are inside rows, not counted as steps"


def step_source_words(doc: Mapping[str, Any]) -> str:
    """The step source once, as the process that counted the steps said it (what a row is; how several
    optimizers stepped), with the other optimizers' steps against the rows where some stepped inside them.
    A document from before the sentence was kept: its source and its stored note."""
    text = doc.get("step_source_text")
    if not isinstance(text, str) or not text:
        note = doc.get("step_source_note")
        return str(doc.get("step_source") or "") + (f"; {note}" if isinstance(note, str) and note else "")
    others = other_steps_sentence(doc)
    return text + (f"; {others}" if others else "")
