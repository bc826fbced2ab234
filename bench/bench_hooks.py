"""What each part of a CPU training step costs with perfcore run's hooks in, against the same
process with them out: one process, the hooks swapped in and out between blocks of 5 steps
(the order alternating), so memory layout and machine drift cancel.

    python bench/bench_hooks.py [--rounds 1500]

Prints, per part of the step (next(loader), .to, forward, loss, zero_grad, backward,
optimizer.step, whole step), the median time with the hooks out and in, and the difference.
Complements bench_run_overhead.py (whole processes against each other): this one says where
the cost sits.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

PARTS = ("next", "to", "forward", "loss", "zero_grad", "backward", "optimizer", "step")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1500)
    args = ap.parse_args()
    from perfcore.run.child import instrument
    from perfcore.run.protocol import ChildConfig

    instrument.activate(ChildConfig(run_dir=tempfile.mkdtemp(prefix="perfcore-hooks-"), warmup=0), process_hooks=False)
    import torch.optim.optimizer as optim_mod
    import torch.utils.data._utils.fetch as fetch_mod
    from overhead_train import epochs, make_loop

    inst = instrument.STATE
    model, opt, loader, crit = make_loop()
    hooks = inst.torch_hooks
    slots = [(owner, attr, hooks.installed[name]) for name, (owner, attr) in hooks.patched.items()]
    slots.append((fetch_mod._MapDatasetFetcher, "fetch", fetch_mod._MapDatasetFetcher.fetch))
    pre, post = dict(optim_mod._global_optimizer_pre_hooks), dict(optim_mod._global_optimizer_post_hooks)

    def hooks(on: bool) -> None:
        for owner, attr, hooked in slots:
            setattr(owner, attr, hooked if on else hooked.__wrapped__)
        for live, saved in (
            (optim_mod._global_optimizer_pre_hooks, pre),
            (optim_mod._global_optimizer_post_hooks, post),
        ):
            live.clear()
            if on:
                live.update(saved)

    it = epochs(loader, sys.maxsize)
    now = time.perf_counter_ns

    def step(out=None):
        a = now()
        x, y = next(it)
        b = now()
        x = x.to("cpu")
        c = now()
        pred = model(x)
        d = now()
        loss = crit(pred, y)
        e = now()
        opt.zero_grad()
        f = now()
        loss.backward()
        g = now()
        opt.step()
        t = now()
        if out is not None:
            for name, v in zip(PARTS, (b - a, c - b, d - c, e - d, f - e, g - f, t - g, t - a)):
                out[name].append(v)

    for _ in range(50):
        step()
    assert inst.timer is not None, "the hooks did not make a timer"
    res = {on: {p: [] for p in PARTS} for on in (False, True)}
    t0 = time.time()
    for r in range(args.rounds):
        for on in (False, True) if r % 2 else (True, False):
            hooks(on)
            step()  # the step right after a swap is not counted
            for _ in range(5):
                step(res[on])
    hooks(True)
    print(
        f"CPU training step (bench/overhead_train.py's model), {args.rounds} rounds x 5 steps each way, "
        f"{time.time() - t0:.0f} s; medians"
    )
    print("| part | hooks out | hooks in | difference |")
    print("|---|---|---|---|")
    for p in PARTS:
        off, on = statistics.median(res[False][p]), statistics.median(res[True][p])
        print(
            f"| {p} | {off / 1e3:.1f} us | {on / 1e3:.1f} us | {(on - off) / 1e3:+.1f} us ({100 * (on - off) / off:+.1f}%) |"
        )


if __name__ == "__main__":
    main()
