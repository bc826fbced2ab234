"""A loop that fails after argv[1] steps with a RuntimeError whose message is many lines long, as
torch's shape and CUDA errors are."""

import sys

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 6
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(n + 1):
    if i == n:
        detail = "\n".join(f"  frame {k}: " + "x" * 60 for k in range(15))
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x8 and 9x2): " + "y" * 250 + "\n" + detail)
    loss = model(torch.randn(4, 8)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
