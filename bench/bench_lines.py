"""What the line sampler and the sync-call counter cost a ~5 ms CPU training step, side by side in one
process: blocks of steps with nothing, the sampler (default rate, and 10x it), the counter, and both,
the order rotating every round, so machine drift and memory layout cancel. Also the counter's cost per
`.item()` call.

    python bench/bench_lines.py [--rounds 40] [--block 25]

The step: an MLP forward/backward/SGD step with per-sample Python metrics (`.item()` per sample), ~5 ms
on one thread. Prints the median step per variant, its overhead against nothing, and ns per counted call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

VARIANTS = ("none", "sampler 100 Hz", "sampler 1 kHz", "counter", "sampler 100 Hz + counter")


def make_step(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(192, 256), torch.randint(0, 10, (192,))

    def step():
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        d = logits.detach()
        return [d[i].max().item() for i in range(192)]

    return step


def block(torch, step, variant: str, n: int) -> list[float]:
    from perfcore.capture.line_sampler import LineSampler
    from perfcore.capture.sync_calls import SyncCounter

    sampler = LineSampler(interval_s=0.001 if "1 kHz" in variant else 0.01) if "sampler" in variant else None
    counter = SyncCounter(torch) if "counter" in variant else None
    if sampler:
        sampler.start()
    if counter:
        counter.start()
    times = []
    try:
        for _ in range(n):
            t = time.perf_counter_ns()
            step()
            times.append((time.perf_counter_ns() - t) / 1e6)
    finally:
        if counter:
            counter.stop()
        if sampler:
            sampler.stop()
    return times


def per_call_ns(torch, n: int = 20000) -> tuple[float, float]:
    from perfcore.capture.sync_calls import SyncCounter

    x = torch.ones(())
    item = x.item

    def loop():
        t = time.perf_counter_ns()
        for _ in range(n):
            x.item()
        return (time.perf_counter_ns() - t) / n

    loop()
    plain, counted = [], []
    for _ in range(7):
        plain.append(loop())
        with SyncCounter(torch):
            counted.append(loop())
    del item
    return statistics.median(plain), statistics.median(counted)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--block", type=int, default=25)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    step = make_step(torch)
    for _ in range(50):
        step()
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
        for v in order:
            times[v] += block(torch, step, v, args.block)
    base = statistics.median(times["none"])
    print(f"Python {sys.version.split()[0]}, torch {torch.__version__}, {args.rounds} rounds x {args.block} steps")
    print(f"{'variant':28s} {'median ms':>10s} {'overhead':>9s}")
    for v in VARIANTS:
        m = statistics.median(times[v])
        print(f"{v:28s} {m:10.3f} {100 * (m / base - 1):+8.1f}%")
    plain, counted = per_call_ns(torch)
    print(f"x.item(): {plain:.0f} ns plain, {counted:.0f} ns counted (+{counted - plain:.0f} ns a call)")


if __name__ == "__main__":
    main()
