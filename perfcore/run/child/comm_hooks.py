"""comm on CPU/gloo for `perfcore run`: time inside torch.distributed collectives, and DDP's gradient
all-reduce from launch to completion."""

from __future__ import annotations

__all__ = ["patch_distributed", "COLLECTIVES"]

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "broadcast",
    "reduce_scatter",
    "barrier",
    "all_to_all",
    "reduce",
    "gather",
    "scatter",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_gather_object",
    "broadcast_object_list",
)


def patch_distributed(inst, torch) -> None:
    """comm on CPU/gloo: time inside torch.distributed collectives, and DDP's gradient all-reduce
    from launch to completion (a comm hook wrapping the default one, or the user's)."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    now = inst.now_ns

    def timed(orig):
        def collective(*args, **kwargs):
            if inst.timer is None:
                return orig(*args, **kwargs)
            t0 = now()
            try:
                return orig(*args, **kwargs)
            finally:
                inst.timer.engine.record("comm", t0, now())  # async_op=True counts the launch only

        return collective

    for name in COLLECTIVES:
        if hasattr(dist, name):
            setattr(dist, name, timed(getattr(dist, name)))

    def timed_hook(hook):
        def comm_hook(state, bucket):
            t0 = now()
            fut = hook(state, bucket)
            timer = inst.timer
            if timer is None:
                return fut

            def done(f):
                timer.engine.record("comm", t0, now())  # runs on the comm thread: its own span buffer
                return f.value()

            return fut.then(done)

        return comm_hook

    orig_register = DDP.register_comm_hook

    def register_comm_hook(ddp, state, hook):
        ddp._perfcore_hooked = True
        return orig_register(ddp, state, timed_hook(hook))

    DDP.register_comm_hook = register_comm_hook
    orig_forward = DDP.forward

    def forward(ddp, *args, **kwargs):
        # Register the timed default hook at the first forward, so a user's own
        # register_comm_hook (made before training starts) still goes through.
        if not getattr(ddp, "_perfcore_hooked", False):
            ddp._perfcore_hooked = True
            try:
                orig_register(ddp, None, timed_hook(default_hooks.allreduce_hook))
            except Exception as e:
                inst.notes.append(f"DDP all-reduce not timed: {e}")
        return orig_forward(ddp, *args, **kwargs)

    DDP.forward = forward
