"""A CPU training loop that times itself (used by bench_run_overhead.py; not perfcore-aware).

    python bench/overhead_train.py STEPS

PROFILE=torch wraps the loop in torch.profiler (CPU activity), the usual alternative.
BENCH_RING=IN,OUT,BLOCK,WARM runs in lock-step with the other variants of the benchmark: after
WARM steps it prints READY, then waits for a byte on fifo IN, runs BLOCK steps, writes a byte to
fifo OUT, and so on. Only one variant runs at a time and neighbouring blocks see the same machine,
so a slow minute on a shared machine slows all variants alike.
"""

import os
import statistics
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def epochs(loader, steps):
    """Batches from as many epochs as `steps` needs (a new DataLoader iterator each epoch)."""
    n = 0
    while True:
        for batch in loader:
            if n == steps:
                return
            n += 1
            yield batch


def make_loop():
    """The model, optimizer, loader and loss of the loop (bench_hooks.py uses the same)."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(256 * 32, 256), torch.randint(0, 10, (256 * 32,)))
    return model, opt, DataLoader(data, batch_size=32, shuffle=True), nn.CrossEntropyLoss()


def main(steps: int) -> None:
    ring = os.environ.get("BENCH_RING")
    block, warm = 0, 10
    if ring:
        fifo_in, fifo_out, block, warm = ring.split(",")
        block, warm = int(block), int(warm)
        rfd, wfd = os.open(fifo_in, os.O_RDWR), os.open(fifo_out, os.O_RDWR)
    model, opt, loader, crit = make_loop()
    prof = None
    if os.environ.get("PROFILE") == "torch":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    times, blocks = [], []
    end = time.perf_counter()
    for i, (x, y) in enumerate(epochs(loader, steps)):
        x = x.to("cpu")
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        now = time.perf_counter()
        if i >= warm:
            times.append(now - end)
        done = i + 1 - warm
        if ring and done >= 0 and done % block == 0:
            if done == 0:
                print("READY", flush=True)
            else:
                blocks.append(statistics.median(times[-block:]))
                os.write(wfd, b"x")  # the next variant's turn
            if i + 1 < steps:
                os.read(rfd, 1)
        end = time.perf_counter()
    if prof is not None:
        prof.__exit__(None, None, None)
    # Median of steady-state steps: one-off costs and noise spikes drop out.
    print(f"LOOP_MS_PER_STEP {statistics.median(times) * 1e3:.4f}", flush=True)
    if blocks:
        print("BLOCK_MS " + " ".join(f"{b * 1e3:.4f}" for b in blocks), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
