"""DataLoader workers that hide most of the loading behind compute: the workers read each batch in
a little more time than the model takes to train on one, so most of the read overlaps compute and a
small part is exposed as a wait in next(). The read is a sleep (storage latency, no core used) set
from the loop's own measurements, shared with the workers: the recent compute time, scaled so that
the recent exposed share approaches --exposed (9%). On a quiet machine that is a read about 10%
slower than compute; on a busy one the workers also wake late, and the read shortens to keep the
share, down to no read at all: past that (a crowded machine: 15-33% was measured with 11-13
processes runnable on 2 cores) the exposed share is what the machine makes it. The script's own
meter gives the truth (DATA_SHARE) over the steps after the first --warmup, as perfcore run --warmup
leaves them out."""
import argparse
import collections
import math
import multiprocessing
import statistics
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Shards(Dataset):
    """One shard of records per index, read whole: a batch."""

    def __init__(self, shards, batch_size, read_s):
        self.x = torch.randn(shards, batch_size, 256)
        self.y = torch.randint(0, 10, (shards, batch_size))
        self.read_s = read_s  # a shared double: the main process sets it, the workers read it

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.read_s.value)  # stands in for reading the shard from remote storage
        return self.x[i], self.y[i]


def main():
    p = argparse.ArgumentParser(description="classifier with loading hidden behind compute")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--exposed", type=float, default=0.09, help="share of each step left waiting for data")
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()

    # One compute thread: a step's time then follows the machine's load smoothly, instead of stalling
    # at a thread barrier whenever one of two threads is preempted, so the read time can follow it.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, args.width), nn.ReLU(), nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = nn.CrossEntropyLoss()
    # The workers read shards side by side, so the loader delivers one every read_s / workers; a
    # read of workers / (1 - exposed) compute times would leave `exposed` of each step waiting.
    scale = args.workers / (1 - args.exposed)
    read_s = multiprocessing.Value("d", 0.005 * scale, lock=False)
    loader = DataLoader(Shards(args.steps, args.batch_size, read_s), batch_size=None, num_workers=args.workers,
                        shuffle=True)
    compute = collections.deque(maxlen=9)
    waits = collections.deque(maxlen=24)
    steps = collections.deque(maxlen=24)
    data_s = step_s = 0.0
    end = time.perf_counter()
    for step, (x, y) in enumerate(loader):
        fetched = time.perf_counter()
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        done = time.perf_counter()
        compute.append(done - fetched)
        waits.append(fetched - end)
        steps.append(done - end)
        # Waits the read does not explain (workers woken late on a busy machine) shorten the read.
        scale *= math.exp(0.2 * (args.exposed - sum(waits) / sum(steps)))
        read_s.value = scale * statistics.median(compute)
        if step >= args.warmup:
            data_s += fetched - end
            step_s += done - end
        end = done
    n = step + 1 - args.warmup
    print(f"loss {loss.item():.3f} steps {step + 1}: step {step_s / n * 1e3:.2f} ms, data {data_s / n * 1e3:.2f} ms"
          f" (read {read_s.value * 1e3:.2f} ms a batch)", flush=True)
    print(f"DATA_SHARE {data_s / step_s:.4f}")


if __name__ == "__main__":
    main()
