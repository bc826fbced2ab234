"""Imports torch and does tensor maths, but no training step of any kind (a data-prep script)."""
import time

import torch

x = torch.randn(64, 64)
for _ in range(3):
    x = (x @ x).tanh()
time.sleep(float(__import__("sys").argv[1]) if len(__import__("sys").argv) > 1 else 0)
print("DONE", float(x.sum()))
