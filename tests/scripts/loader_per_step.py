"""A loop that makes a new DataLoader every step and takes one batch from it (as quick scripts do:
`next(iter(DataLoader(...)))`), plus an evaluation loader made once. Prints `STEPS <n>`."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(steps):
    x, y = next(iter(DataLoader(data, batch_size=16, shuffle=True)))
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    for x, y in DataLoader(data, batch_size=64):
        model(x)
print(f"STEPS {steps}")
