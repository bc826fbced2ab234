"""CUDA Graphs for a training step: capture forward + backward + optimizer step once, replay it.

    step = perfcore.graphs.capture_step(model, loss_fn, optimizer, example_batch)
    for x, y in loader:
        loss = step((x, y))          # copies into the static inputs, replays; returns the static loss

Static inputs and outputs: `step.static_inputs` and `step.static_loss` are the tensors the graph
reads and writes; batches must keep the example's shapes and dtypes, and the returned loss is
overwritten by the next replay (clone it to keep it). Capture runs `warmup` real training steps on
the example batch first, on a side stream, as CUDA Graphs require.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from perfcore._native import require_cuda
from perfcore.errors import PerfcoreError, UsageError

__all__ = ["capture_step", "GraphedStep", "CaptureError", "launch_overhead", "explain_capture_failure"]

# Optimizers whose step has no host sync, so they capture without a `capturable` flag.
_CAPTURABLE_WITHOUT_FLAG = {"SGD"}


class CaptureError(PerfcoreError):
    """Graph capture failed; the message says which call broke it and what to change."""


def explain_capture_failure(message: str) -> str:
    """A capture error from CUDA/torch -> what usually causes it and the fix (pure; tested on CPU)."""
    m = message.lower()
    if "capturable" in m:
        return (
            "the optimizer is not capturable: create it with capturable=True (Adam, AdamW, ...) so its step "
            "keeps its state on the GPU"
        )
    if (
        "synchroniz" in m
        or "item" in m
        or "operation not permitted when stream is capturing" in m
        or "cudaerrorstreamcaptureunsupported" in m
    ):
        return (
            "a CPU sync ran inside the step: .item(), .cpu(), .tolist(), printing a tensor, "
            "torch.cuda.synchronize() or a data-dependent Python branch on a tensor value; move it out of the "
            "step or keep the value on the GPU"
        )
    if "invalidated" in m or "cudaerrorstreamcaptureinvalidated" in m:
        return (
            "work outside the capture touched the captured stream (another thread, or a library call on the "
            "default stream); capture in one thread and keep other streams idle"
        )
    if "dynamic" in m or "shape" in m or "size" in m:
        return (
            "the step's shapes changed between calls (dynamic shapes): a graph replays fixed shapes, so pad "
            "batches to one size (drop_last=True) or capture one graph per shape"
        )
    if "allocat" in m or "memory" in m:
        return (
            "memory was allocated from outside the graph's private pool during capture; warm up more "
            "iterations first, and avoid host-side allocations inside the step"
        )
    return "an operation in the step cannot be captured; run the step eagerly to find the failing op"


def _check_optimizer(optimizer) -> None:
    name = type(optimizer).__name__
    groups = optimizer.param_groups
    if any("capturable" in g for g in groups):
        if not all(g.get("capturable") for g in groups):
            raise CaptureError(
                f"optimizer {name} cannot be captured as created: pass capturable=True "
                f"({name}(params, ..., capturable=True)) so its step stays on the GPU"
            )
    elif name not in _CAPTURABLE_WITHOUT_FLAG:
        raise CaptureError(
            f"optimizer {name} has no capturable mode; use one that has (SGD, Adam, AdamW with "
            "capturable=True) or capture forward+backward only"
        )


def _to_device(batch, device):
    if hasattr(batch, "to"):
        return batch.to(device).clone()
    return type(batch)(_to_device(b, device) for b in batch)


class GraphedStep:
    def __init__(self, graph, static_inputs: Sequence[Any], static_loss):
        self.graph = graph
        self.static_inputs = list(static_inputs)
        self.static_loss = static_loss

    def __call__(self, batch) -> Any:
        items = batch if isinstance(batch, (list, tuple)) else (batch,)
        if len(items) != len(self.static_inputs):
            raise UsageError(f"the graphed step takes {len(self.static_inputs)} tensors, got {len(items)}")
        for dst, src in zip(self.static_inputs, items):
            if tuple(src.shape) != tuple(dst.shape) or src.dtype != dst.dtype:
                raise UsageError(
                    f"batch shape {tuple(src.shape)} {src.dtype} differs from the captured "
                    f"{tuple(dst.shape)} {dst.dtype}: a graph replays fixed shapes (drop_last=True)"
                )
            dst.copy_(src, non_blocking=True)
        self.graph.replay()
        return self.static_loss


def capture_step(model, loss_fn: Callable, optimizer, example_batch, warmup: int = 3) -> GraphedStep:
    """Capture one training step (see the module docstring). Raises CaptureError with the cause."""
    require_cuda("CUDA Graph capture")
    import torch

    _check_optimizer(optimizer)
    items = example_batch if isinstance(example_batch, (list, tuple)) else (example_batch,)
    static = [_to_device(t, "cuda") for t in items]

    def step():
        out = model(static[0])
        loss = loss_fn(out, *static[1:]) if len(static) > 1 else loss_fn(out)
        loss.backward()
        optimizer.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            for _ in range(warmup):
                optimizer.zero_grad(set_to_none=True)
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = step()
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CaptureError(f"capture failed ({first}): {explain_capture_failure(str(e))}") from e
    return GraphedStep(graph, static, static_loss)


def launch_overhead(kernels: int = 2000) -> dict[str, float]:
    """us per kernel: launched eagerly (host enqueue cost, and GPU time back to back) against the
    same empty kernels replayed from a CUDA Graph."""
    C = require_cuda("launch overhead")
    import torch

    eager = C.measure_launch_overhead(kernels, torch.cuda.current_stream().cuda_stream)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        C.launch_empty(1, s.cuda_stream)
    torch.cuda.synchronize()
    with torch.cuda.graph(g, stream=s):
        C.launch_empty(kernels, s.cuda_stream)
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    torch.cuda.synchronize()
    return {
        "eager_host_us_per_launch": eager["host_ns_per_launch"] / 1e3,
        "eager_gpu_us_per_kernel": eager["gpu_ns_per_kernel"] / 1e3,
        "graph_us_per_kernel": a.elapsed_time(b) * 1e3 / kernels,
    }
