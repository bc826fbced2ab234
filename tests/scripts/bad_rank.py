"""A script that sets RANK itself, to a name rather than a number, then trains a few steps."""

import os

import torch

os.environ["RANK"] = "worker-a"
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    loss = model(torch.randn(4, 8)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ITERATIONS 6", flush=True)
