"""A loop stopped by Ctrl-C part-way: a bare KeyboardInterrupt (no message), as the terminal raises it."""
import torch

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(30):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    if i == 20:
        raise KeyboardInterrupt
