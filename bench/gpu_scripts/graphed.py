"""make_graphed_callables on a small MLP, trained 60 steps."""

import torch
from torch import nn

m = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256)).cuda()
x = torch.randn(32, 256, device="cuda", requires_grad=False)
g = torch.cuda.make_graphed_callables(m, (x,))
opt = torch.optim.SGD(m.parameters(), lr=1e-3)
for i in range(60):
    loss = g(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("GRAPHED ok", float(loss))
