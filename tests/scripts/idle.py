"""Imports torch and does tensor maths for a while (argv[1] seconds of its CPU time), but no
training step of any kind (a data-prep script)."""
import sys
import time

import torch

torch.set_num_threads(1)  # CPU time then never runs ahead of wall time
work_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
x = torch.randn(64, 64)
while True:
    for _ in range(3):
        x = (x @ x).tanh()
    if time.process_time() >= work_s:
        break
print("DONE", float(x.sum()))
