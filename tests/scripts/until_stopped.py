"""A loop that trains until it is stopped, saying "TRAINING" once its first steps are done.
`atexit`: instead, train 20 steps and then spend 3 s in an atexit handler (what a multiprocessing
Pool's shutdown looks like to a signal), saying "EXITING" when it gets there."""
import atexit
import sys
import time

import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
mode = sys.argv[1] if len(sys.argv) > 1 else "forever"
if mode == "atexit":
    def slow_exit():
        print("EXITING", flush=True)
        time.sleep(3)

    atexit.register(slow_exit)
i = 0
while mode == "forever" or i < 20:
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    i += 1
    if i == 20 and mode == "forever":
        print("TRAINING", flush=True)
    time.sleep(0.002)
