"""Findings beside the verdict into words: a probable leak or memory pressure (analysis.memory_findings'
figures) as a sentence and the advice that answers it; the evaluation passes set apart from the
training steps (attribution.evaluation_finding); what a step is (the step source, and how several
optimizers stepped: run.child.part_writer's optimizer_order) said once; why a run saw no step."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.run_context import NoStep
from perfcore.analysis.run_parts import Evaluation
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms, fmt_share

__all__ = [
    "memory_words",
    "memory_sentence",
    "evaluation_sentence",
    "optimizer_order_sentence",
    "other_steps_sentence",
    "step_source_words",
    "step_source_text",
    "no_step_sentence",
    "STEP_SOURCE_WORDS",
    "LOOKS_FOR",
]

# What a step is, by the step source perfcore run chose.
STEP_SOURCE_WORDS = {
    "optimizer": "optimizer steps (torch.optim)",
    "backward": "backward passes on the main thread (no torch.optim optimizer stepped)",
    "batch": "training batch fetches (no optimizer step, no backward)",
    "forward": "top-level module calls (no optimizer step, no backward, no training DataLoader)",
}
LOOKS_FOR = (
    "perfcore looks for a step in: torch.optim optimizer.step(), else loss.backward() on the main "
    "thread, else a DataLoader batch fetch, else a top-level nn.Module call; none has happened yet. "
    "Force one with perfcore run --step-on optimizer|backward|batch|forward"
)

_ADVICE = {
    "memory_leak": "Something keeps tensors alive across steps: a loss or output appended to a list without "
    ".item() or .detach(), a growing cache, or a graph kept by retain_graph=True.",
    "memory_pressure": "Each retry synchronizes and frees cached blocks: lower the batch size, use activation "
    "checkpointing or bf16, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
    "memory_near_capacity": "One larger batch or a longer sequence will not fit: keep headroom, or cut activation "
    "memory (checkpointing, bf16) before scaling up.",
}


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
    """A memory finding's sentence, from its figures."""
    return memory_words(f)[0]


def evaluation_sentence(ev: Evaluation | None) -> str:
    """The evaluation passes' cost, from their figures ("" without any, or where none was set apart)."""
    if ev is None or ev.ms_per_pass is None or ev.share_of_wall is None:
        return ""
    n, per = ev.passes, ev.ms_per_pass
    lo = ev.min_ms_per_pass if ev.min_ms_per_pass is not None else per
    hi = ev.max_ms_per_pass if ev.max_ms_per_pass is not None else per
    # Passes that differ (a last pass over fewer batches, a first one that warms up) are said as their
    # range: one mean "each" hid 0.40, 2.39 and 5.19 s behind "3.82 s each".
    size = f"of {fmt_ms(per)} each" if hi <= 1.25 * lo else f"of {fmt_ms(lo)} to {fmt_ms(hi)} ({fmt_ms(per)} mean)"
    return (
        f"{n} evaluation pass(es) {size} took "
        f"{fmt_share(ev.share_of_wall)} of the wall time ({fmt_ms(ev.total_ms)} in all); "
        "they are reported apart and are not in the step time, the breakdown or the verdict"
    )


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


def other_steps_sentence(r: RunReport) -> str | None:
    """Where several optimizers stepped in one iteration (a GAN's D and G): the other optimizers' steps
    against the rows. The count is said to match the script's iterations only when every other step fits
    one to a row; None when no other optimizer stepped inside the rows."""
    seen = r.seen
    if r.step_source != "optimizer" or seen is None or seen.optimizers < 2 or not seen.other_optimizer_steps:
        return None
    others, rows = seen.other_optimizer_steps, r.steps + r.warmup_steps
    if others == rows and not seen.optimizer_handovers:
        return "one per row: the count matches the script's iterations"
    return f"{others} steps of other optimizers against {rows} rows: they are inside rows, not counted as steps"


def step_source_text(r: RunReport) -> str:
    """What a row is: the step source perfcore run chose (and how several optimizers stepped), or a
    StepTimer's own ("timer.step()", its step_on)."""
    if r.seen is None:  # a StepTimer's result: its step_on
        return str(r.step_source or "")
    text = STEP_SOURCE_WORDS.get(r.step_source or "", "none")
    if r.optimizer_order is not None and r.seen.optimizers >= 2:
        text += "; " + optimizer_order_sentence(r.optimizer_order, r.seen.optimizers)
    return text


def step_source_words(r: RunReport) -> str:
    """The step source once (what a row is; how several optimizers stepped), with the other optimizers'
    steps against the rows where some stepped inside them."""
    others = other_steps_sentence(r)
    return step_source_text(r) + (f"; {others}" if others else "")


def no_step_sentence(n: NoStep) -> str:
    """Why a run saw no step, from what the hooks saw."""
    if not n.torch_instrumented:
        if n.torch_imported:
            return (
                f"no step seen in {n.wall_s:.1f} s: torch was loaded in a way perfcore could not instrument "
                "(a custom import finder?); time the loop with perfcore.StepTimer instead"
            )
        # --step-on cannot help a script that has no torch loop to find a step in.
        return (
            f"no step seen in {n.wall_s:.1f} s: the script never imported torch, so there was no training loop to time"
        )
    seen = (
        f"{n.forward} top-level forward call(s), {n.backward} backward pass(es), "
        f"{n.batch_all} DataLoader batch(es), "
        f"{'optimizer steps' if n.optimizer_stepped else 'no optimizer step'}"
    )
    if n.forced:
        # The source that would have given steps, in the automatic choice's order.
        works = next(
            (
                s
                for s, ok in (
                    ("optimizer", n.optimizer_stepped),
                    ("backward", n.backward > 0),
                    ("batch", n.batch_all > 1),
                    ("forward", n.forward > 1),
                )
                if ok and s != n.forced
            ),
            None,
        )
        fix = (
            f"--step-on {works} would find steps here (or leave --step-on out for the automatic choice)"
            if works
            else "nothing else looked like a step either"
        )
        return f"no step seen in {n.wall_s:.1f} s with --step-on {n.forced}: seen {seen}; {fix}"
    return (
        f"no step seen in {n.wall_s:.1f} s: {n.forward} top-level forward call(s), "
        f"{n.backward} backward pass(es), {n.batch_all} DataLoader batch(es), "
        f"no optimizer step. {LOOKS_FOR.split('; none')[0]}. Force one with --step-on "
        "optimizer|backward|batch|forward"
    )
