"""A loop that times its own iterations (as makemore and minGPT print iter_dt) for argv[1] seconds
and prints `STEP <i> <ms>` for each, then `ITERATIONS <n>`."""

import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 14.0
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 64), torch.randn(32, 8)
lines, i = [], 0
t_end = time.perf_counter() + seconds
t0 = time.perf_counter()
while t0 < t_end:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.01)  # the rest of a step: a short one, so a stall of perfcore's stands out
    t1 = time.perf_counter()
    lines.append(f"STEP {i} {(t1 - t0) * 1e3:.3f}")
    i, t0 = i + 1, t1
print("\n".join(lines))
print("ITERATIONS", i, flush=True)
