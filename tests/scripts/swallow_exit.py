"""A training loop whose step runs under a broad handler, as some libraries' retry or logging
wrappers do: `except BaseException` around each step, so a SystemExit raised inside it is caught
and the loop runs on. Prints `CAUGHT <n>` and `ITERATIONS <n>`."""
import sys

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 16), torch.randn(32, 4)
caught = 0
for i in range(n):
    try:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    except BaseException:  # noqa: B036 - the shape under test
        caught += 1
print("CAUGHT", caught)
print("ITERATIONS", n)
