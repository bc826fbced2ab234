"""A CUDA Graph capture that failed, in words: what usually causes its reason and the fix, with the
failing call's own message (experiments.graph_capture's CaptureError facts, graph.json's reason)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["capture_error_words", "CAUSES"]

# What usually causes each reason, and the fix.
CAUSES = {
    "not_capturable": (
        "the optimizer is not capturable: create it with capturable=True (Adam, AdamW, ...) so its step "
        "keeps its state on the GPU"
    ),
    "host_sync": (
        "a CPU sync ran inside the step: .item(), .cpu(), .tolist(), printing a tensor, "
        "torch.cuda.synchronize() or a data-dependent Python branch on a tensor value; move it out of the "
        "step or keep the value on the GPU"
    ),
    "invalidated": (
        "work outside the capture touched the captured stream (another thread, or a library call on the "
        "default stream); capture in one thread and keep other streams idle"
    ),
    "dynamic_shapes": (
        "the step's shapes changed between calls (dynamic shapes): a graph replays fixed shapes, so pad "
        "batches to one size (drop_last=True) or capture one graph per shape"
    ),
    "allocation": (
        "memory was allocated from outside the graph's private pool during capture; warm up more "
        "iterations first, and avoid host-side allocations inside the step"
    ),
    "unsupported_op": "an operation in the step cannot be captured; run the step eagerly to find the failing op",
}


def capture_error_words(f: Mapping[str, Any]) -> str:
    """One line: the optimizer that cannot be captured, or the failing call's message and its usual cause."""
    name = f.get("optimizer")
    if f.get("reason") == "optimizer_not_capturable":
        return (
            f"optimizer {name} cannot be captured as created: pass capturable=True "
            f"({name}(params, ..., capturable=True)) so its step stays on the GPU"
        )
    if f.get("reason") == "optimizer_no_capturable_mode":
        return (
            f"optimizer {name} has no capturable mode; use one that has (SGD, Adam, AdamW with "
            "capturable=True) or capture forward+backward only"
        )
    cause = CAUSES.get(str(f.get("reason")), CAUSES["unsupported_op"])
    return f"capture failed ({f['detail']}): {cause}" if f.get("detail") else f"capture failed: {cause}"
