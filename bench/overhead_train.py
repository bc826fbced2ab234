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
import resource
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


class Ticks:
    """Each step's end, from the loop or the library's callback: the step's time (from the last step's end,
    its batch's fetch included), minor page faults over the measured steps, and in a ring (BENCH_RING) the
    hand-over after each block; COUNT_CALLS's counter on over steps warm .. warm + count_n - 1."""

    def __init__(self, steps: int) -> None:
        self.steps, self.ring, self.block, self.warm = steps, os.environ.get("BENCH_RING"), 0, 10
        if self.ring:
            fifo_in, fifo_out, block, warm = self.ring.split(",")
            self.block, self.warm = int(block), int(warm)
            self.rfd, self.wfd = os.open(fifo_in, os.O_RDWR), os.open(fifo_out, os.O_RDWR)
        self.count_n = int(os.environ.get("COUNT_CALLS", "0"))
        self.counts: dict[str, int] = {}
        self.times, self.blocks, self.sums = [], [], []
        self.i, self.faults, self.end = 0, 0, time.perf_counter()

    def __call__(self) -> None:
        now, i, warm = time.perf_counter(), self.i, self.warm
        if self.count_n and i == warm + self.count_n - 1:
            sys.setprofile(None)
        if i >= warm:
            self.times.append(now - self.end)
        if i + 1 == warm:  # a step that maps fresh memory pays page faults (glibc's mmap threshold, per process)
            self.faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        done = i + 1 - warm
        if self.ring and done >= 0 and done % self.block == 0:
            self._hand_over(done == 0)
        if self.count_n and i + 1 == warm:
            sys.setprofile(_counter(self.counts))
        self.i += 1
        self.end = time.perf_counter()

    def _hand_over(self, ready: bool) -> None:
        if ready:
            print("READY", flush=True)
        else:
            self.blocks.append(statistics.median(self.times[-self.block :]))
            self.sums.append(sum(self.times[-self.block :]))
            os.write(self.wfd, b"x")  # the next variant's turn
        if self.i + 1 < self.steps:
            os.read(self.rfd, 1)

    def report(self) -> None:
        # Median of steady-state steps: one-off costs and noise spikes drop out.
        print(f"LOOP_MS_PER_STEP {statistics.median(self.times) * 1e3:.4f}", flush=True)
        print(f"STEPS {self.i}", flush=True)  # the step ends the loop reached (a library's: its callback's count)
        if self.count_n:
            calls = sorted(self.counts.items(), key=lambda kv: -kv[1])
            print("CALLS " + json.dumps({k: v / self.count_n for k, v in calls}))
        if self.blocks:
            print("BLOCK_MS " + " ".join(f"{b * 1e3:.4f}" for b in self.blocks), flush=True)
            # Every step's time, one-off costs included (what a mean per step, such as a self-report, holds).
            print(f"TOTAL_MS {sum(self.sums) * 1e3:.4f}", flush=True)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - self.faults
        print(f"MINFLT_PER_STEP {faults / max(1, len(self.times)):.1f}", flush=True)


def main(steps: int, shape: str = "mlp") -> None:
    tick = Ticks(steps)  # the ring's fifos are opened before the shape is made, as before
    from overhead_shapes import Owned, make

    shaped = make(shape, int(os.environ.get("BENCH_THREADS", "1")))
    prof = None
    if os.environ.get("PROFILE") == "torch":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    if isinstance(shaped, Owned):
        shaped.run(steps, tick)
    else:
        loader, step = shaped
        for batch in epochs(loader, steps):
            step(batch)
            tick()
    if prof is not None:
        prof.__exit__(None, None, None)
    tick.report()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300, sys.argv[2] if len(sys.argv) > 2 else "mlp")
