"""A loop that asks torch for more intra-op threads than the CPUs it may run on (argv[1] threads,
argv[2] iterations): OpenMP's threads then spin waiting for each other."""
import sys

import torch

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
model = torch.nn.Linear(256, 256)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(512, 256)
for _ in range(n):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ITERATIONS", n, flush=True)
