"""Linear regression on plain tensors: no nn.Module, no DataLoader. argv[1] `autograd` computes the
gradients with loss.backward(); `manual` sets p.grad by hand (no backward at all) before opt.step().
Prints `ITERATIONS <n>`."""
import sys

import torch

how = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 12
torch.manual_seed(0)
x = torch.randn(64, 8)
y = x @ torch.randn(8, 1) + 0.5
w = torch.zeros(8, 1, requires_grad=how == "autograd")
b = torch.zeros(1, requires_grad=how == "autograd")
opt = torch.optim.SGD([w, b], lr=0.05)
for i in range(n):
    if how == "autograd":
        loss = ((x @ w + b - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
    else:
        err = x @ w + b - y
        w.grad = 2 * x.T @ err / len(x)
        b.grad = 2 * err.mean().reshape(1)
    opt.step()
print("ITERATIONS", n)
