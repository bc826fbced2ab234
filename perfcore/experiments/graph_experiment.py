"""`perfcore graph`: eager vs CUDA-Graph step time for a workload, launch overhead per kernel, and
the check that losses and parameters after K steps match eager within tolerance."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from perfcore._native import require_cuda
from perfcore.experiments.graph_capture import CaptureError, capture_step, launch_overhead
from perfcore.workloads import Workload

__all__ = ["graph_experiment", "check_same_training"]


def check_same_training(
    eager_losses, graph_losses, eager_params, graph_params, rtol: float = 1e-3, atol: float = 1e-5
) -> dict[str, Any]:
    """Do two training runs agree? (pure: lists of floats and of numpy arrays)"""
    el, gl = np.asarray(eager_losses, dtype=np.float64), np.asarray(graph_losses, dtype=np.float64)
    loss_err = float(np.max(np.abs(el - gl) / np.maximum(np.abs(el), atol))) if len(el) else 0.0
    perr = 0.0
    for a, b in zip(eager_params, graph_params):
        denom = np.maximum(np.abs(a), atol)
        perr = max(perr, float(np.max(np.abs(a - b) / denom)) if a.size else 0.0)
    return {
        "max_loss_rel_error": loss_err,
        "max_param_rel_error": perr,
        "match": bool(
            loss_err <= rtol
            and np.allclose(
                np.concatenate([p.ravel() for p in eager_params] or [[0]]),
                np.concatenate([p.ravel() for p in graph_params] or [[0]]),
                rtol=rtol,
                atol=atol,
            )
        ),
    }


def graph_experiment(workload: Workload, steps: int = 50, check_steps: int = 5) -> dict[str, Any]:
    require_cuda("perfcore graph")
    import torch

    model = workload.model.cuda()
    opt = workload.optimizer
    loader = workload.loader(num_workers=0)
    it = iter(loader)
    batches = [tuple(t.cuda() for t in next(it)) for _ in range(max(check_steps, 2))]
    example = batches[0]
    start_model = copy.deepcopy(model.state_dict())
    start_opt = copy.deepcopy(opt.state_dict())

    def eager_step(b):
        opt.zero_grad(set_to_none=True)
        loss = workload.loss_fn(model(b[0]), *b[1:])
        loss.backward()
        opt.step()
        return loss

    def timed(fn, n):
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for i, (a, b) in enumerate(ev):
            a.record()
            fn(batches[i % len(batches)])
            b.record()
        torch.cuda.synchronize()
        return float(np.median([a.elapsed_time(b) for a, b in ev]))

    # Eager reference: 3 warm-up steps on the example batch (as capture does), then check_steps steps.
    for _ in range(3):
        eager_step(example)
    eager_losses = [float(eager_step(b)) for b in batches[:check_steps]]
    eager_params = [p.detach().cpu().numpy().copy() for p in model.parameters()]
    eager_ms = timed(eager_step, steps)

    model.load_state_dict(start_model)
    opt.load_state_dict(start_opt)
    result: dict[str, Any] = {
        "schema": "perfcore.graph/1",
        "workload": workload.name,
        "steps": steps,
        "eager_step_ms": eager_ms,
    }
    try:
        step = capture_step(model, workload.loss_fn, opt, example, warmup=3)
    except CaptureError as e:
        # The reason and the failing call's message; `error` keeps the one line graph.json has always had.
        result.update(captured=False, **e.facts(), error=str(e))
    else:
        graph_losses = [float(step(b).clone()) for b in batches[:check_steps]]
        graph_params = [p.detach().cpu().numpy().copy() for p in model.parameters()]
        result["check"] = check_same_training(eager_losses, graph_losses, eager_params, graph_params)
        result["graph_step_ms"] = timed(step, steps)
        result.update(speedup=eager_ms / result["graph_step_ms"], captured=True)
    result["launch_overhead"] = launch_overhead()
    return result
