"""A loop whose DataLoader sets batch_size=8 and pin_memory=True itself (a sweep must keep them)."""
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(16, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(TensorDataset(torch.randn(256, 16)), batch_size=8, pin_memory=True)
for (x,) in loader:
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
