"""A loop that keeps every step's output alive (a history list filled with tensors, not numbers), the
way a leak gets written: memory rises by the same amount every step."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(256, 256)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(4096, 256)), batch_size=32)
history = []
for (x,) in loader:
    out = model(x)
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    # 4 MB kept per step, in one allocation: a temporary beside it would make how much RSS the
    # allocator keeps depend on its thresholds, not on the leak.
    history.append(torch.full((1 << 20,), loss.item()))
print("steps", len(history))
