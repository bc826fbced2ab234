"""A tiny training loop that ends the way scripts end: normally, sys.exit(N), os._exit(N), or by a signal."""
import os
import signal
import sys

import torch

how = sys.argv[1] if len(sys.argv) > 1 else "normal"
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(8):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
print("TRAINED", flush=True)
if how == "sys_exit":
    sys.exit(int(sys.argv[2]))
if how == "os_exit":
    os._exit(int(sys.argv[2]))
if how == "signal":
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))
