"""A CPU training loop that times itself (used by bench_run_overhead.py; not perfcore-aware).

PROFILE=torch wraps the loop in torch.profiler (CPU activity), the usual alternative.
"""
import os
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main(steps: int) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(steps * 32, 256), torch.randint(0, 10, (steps * 32,)))
    loader = DataLoader(data, batch_size=32)
    crit = nn.CrossEntropyLoss()
    prof = None
    if os.environ.get("PROFILE") == "torch":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.__enter__()
    times = []
    end = time.perf_counter()
    for x, y in loader:
        x = x.to("cpu")
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        now = time.perf_counter()
        times.append(now - end)
        end = now
    if prof is not None:
        prof.__exit__(None, None, None)
    steady = sorted(times[10:])  # median of steady-state steps: one-off costs and noise spikes drop out
    print(f"LOOP_MS_PER_STEP {steady[len(steady) // 2] * 1e3:.4f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
