"""A CPU training loop that times itself (used by bench_run_overhead.py; not perfcore-aware).

    python bench/overhead_train.py STEPS [SHAPE]

SHAPE is one of bench/overhead_shapes.py's loops (default mlp, the original one); each step's end calls
tick(), from this loop or from the library's own (a Trainer's callback).

PROFILE=torch wraps the loop in torch.profiler (CPU activity), the usual alternative.
BENCH_THREADS=N: torch's intra-op threads (default 1; 0 leaves torch's default, one a core).
BENCH_RING=IN,OUT,BLOCK,WARM runs in lock-step with the other variants of the benchmark: after
WARM steps it prints READY, then waits for a byte on fifo IN, runs BLOCK steps, writes a byte to
fifo OUT, and so on. Only one variant runs at a time and neighbouring blocks see the same machine,
so a slow minute on a shared machine slows all variants alike.
COUNT_CALLS=N counts, over N steps after the warm-up, the Python functions of perfcore that run on the
training thread (a profile hook on this thread): the frames perfcore adds per step, printed as CALLS json.
"""

import json
import os
import statistics
import sys
import time

if os.environ.get("PRELOAD") == "perfcore":
    # The ring's "imports only" variant: what perfcore's training process imports before the script, nothing
    # instrumented, so a difference it shows is where memory lands, not work perfcore does.
    import numpy  # noqa: F401
    import perfcore.run.child.instrument  # noqa: F401

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


def _counter(counts: dict[str, int]):
    """A profile hook counting calls of functions that live in perfcore's package (its Python frames)."""
    mark = os.sep + "perfcore" + os.sep

    def hook(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if mark in code.co_filename:
                key = f"{code.co_filename.rsplit(mark, 1)[1]}:{code.co_qualname}"
                counts[key] = counts.get(key, 0) + 1

    return hook


def main(steps: int, shape: str = "mlp") -> None:
    ring = os.environ.get("BENCH_RING")
    block, warm = 0, 10
    if ring:
        fifo_in, fifo_out, block, warm = ring.split(",")
        block, warm = int(block), int(warm)
        rfd, wfd = os.open(fifo_in, os.O_RDWR), os.open(fifo_out, os.O_RDWR)
    from overhead_shapes import Owned, make

    shaped = make(shape, int(os.environ.get("BENCH_THREADS", "1")))
    prof = None
    if os.environ.get("PROFILE") == "torch":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    times, blocks, sums = [], [], []
    count_n = int(os.environ.get("COUNT_CALLS", "0"))
    counts: dict[str, int] = {}
    end, i = time.perf_counter(), 0

    def tick() -> None:
        """At step i's end: its time (from the last step's end, its batch's fetch included), and in a ring
        the hand-over after each block; the counter on over steps warm .. warm + count_n - 1."""
        nonlocal end, i
        now = time.perf_counter()
        if count_n and i == warm + count_n - 1:
            sys.setprofile(None)
        if i >= warm:
            times.append(now - end)
        done = i + 1 - warm
        if ring and done >= 0 and done % block == 0:
            if done == 0:
                print("READY", flush=True)
            else:
                blocks.append(statistics.median(times[-block:]))
                sums.append(sum(times[-block:]))
                os.write(wfd, b"x")  # the next variant's turn
            if i + 1 < steps:
                os.read(rfd, 1)
        if count_n and i + 1 == warm:
            sys.setprofile(_counter(counts))
        i += 1
        end = time.perf_counter()

    if isinstance(shaped, Owned):
        shaped.run(steps, tick)
    else:
        loader, step = shaped
        for batch in epochs(loader, steps):
            step(batch)
            tick()
    if prof is not None:
        prof.__exit__(None, None, None)
    # Median of steady-state steps: one-off costs and noise spikes drop out.
    print(f"LOOP_MS_PER_STEP {statistics.median(times) * 1e3:.4f}", flush=True)
    print(f"STEPS {i}", flush=True)  # the step ends the loop reached (a library's loop: its callback's count)
    if count_n:
        print("CALLS " + json.dumps({k: v / count_n for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}))
    if blocks:
        print("BLOCK_MS " + " ".join(f"{b * 1e3:.4f}" for b in blocks), flush=True)
        # Every step's time, one-off costs included (what a mean per step, such as a self-report, holds).
        print(f"TOTAL_MS {sum(sums) * 1e3:.4f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300, sys.argv[2] if len(sys.argv) > 2 else "mlp")
