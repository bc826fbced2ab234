"""N steps (argv[1]) of a sleep (argv[2] seconds) and a tiny SGD step, with the loop's own
per-iteration meter printed at the end: `METER <ms> <ms> ...`."""
import sys
import time

import torch

n, sleep_s = int(sys.argv[1]), float(sys.argv[2])
model = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 16)
last, meter = time.perf_counter(), []
for _ in range(n):
    time.sleep(sleep_s)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    now = time.perf_counter()
    meter.append((now - last) * 1e3)
    last = now
print("METER", *(f"{v:.3f}" for v in meter))
