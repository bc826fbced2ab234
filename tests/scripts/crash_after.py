"""A small DataLoader training loop that crashes with ValueError at batch argv[1] (steps before it
are measured), as a script with one bad sample does."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

n = int(sys.argv[1])
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = DataLoader(TensorDataset(torch.randn(4000, 8), torch.randint(0, 2, (4000,))), batch_size=4)
for i, (x, y) in enumerate(data):
    if i == n:
        raise ValueError(f"bad batch {i}")
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
