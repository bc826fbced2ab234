"""A CPU loop that casts its batch with x.to("cpu", torch.float64) at the top of each step (a cast on
the host, no device in sight), then trains in float64. Prints `ITERATIONS <n>`."""

import sys

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(0)
model = torch.nn.Linear(256, 4).double()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
raw = torch.randn(4096, 256)
for _ in range(n):
    x = raw.to("cpu", torch.float64)
    x = x.to(torch.float64).to("cpu")
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ITERATIONS", n, flush=True)
