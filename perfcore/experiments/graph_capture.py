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

__all__ = [
    "capture_step",
    "GraphedStep",
    "CaptureError",
    "CAPTURE_REASONS",
    "launch_overhead",
    "capture_failure_reason",
]

# Optimizers whose step has no host sync, so they capture without a `capturable` flag.
_CAPTURABLE_WITHOUT_FLAG = {"SGD"}


# Why a capture failed (CaptureError.reason; report.words.runs says each and its fix).
CAPTURE_REASONS = (
    "optimizer_not_capturable",  # created without capturable=True
    "optimizer_no_capturable_mode",  # an optimizer that has none
    "not_capturable",
    "host_sync",
    "invalidated",
    "dynamic_shapes",
    "allocation",
    "unsupported_op",
)


class CaptureError(PerfcoreError):
    """Graph capture failed: the reason (CAPTURE_REASONS), the failing call's own message (detail) and
    the optimizer's class where it is the cause. Its message is report.words.runs'."""

    def __init__(self, reason: str, detail: str | None = None, optimizer: str | None = None) -> None:
        self.reason, self.detail, self.optimizer = reason, detail, optimizer
        from perfcore.report.words.runs import capture_error_words

        super().__init__(capture_error_words(self.facts()))

    def facts(self) -> dict[str, Any]:
        return {"reason": self.reason, "detail": self.detail, "optimizer": self.optimizer}


def capture_failure_reason(message: str) -> str:
    """A capture error from CUDA/torch -> what usually causes it, as a reason code (pure; tested on CPU)."""
    m = message.lower()
    if "capturable" in m:
        return "not_capturable"
    if (
        "synchroniz" in m
        or "item" in m
        or "operation not permitted when stream is capturing" in m
        or "cudaerrorstreamcaptureunsupported" in m
    ):
        return "host_sync"
    if "invalidated" in m or "cudaerrorstreamcaptureinvalidated" in m:
        return "invalidated"
    if "dynamic" in m or "shape" in m or "size" in m:
        return "dynamic_shapes"
    if "allocat" in m or "memory" in m:
        return "allocation"
    return "unsupported_op"


def _check_optimizer(optimizer) -> None:
    name = type(optimizer).__name__
    groups = optimizer.param_groups
    if any("capturable" in g for g in groups):
        if not all(g.get("capturable") for g in groups):
            raise CaptureError("optimizer_not_capturable", optimizer=name)
    elif name not in _CAPTURABLE_WITHOUT_FLAG:
        raise CaptureError("optimizer_no_capturable_mode", optimizer=name)


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
        raise CaptureError(capture_failure_reason(str(e)), first) from e
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
