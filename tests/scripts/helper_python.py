"""A training loop that also runs other Pythons, as scripts do for data prep or evaluation:
argv[1] `subprocess` runs a small training script with subprocess.call([sys.executable, ...]) before
training, `pool` maps over a multiprocessing Pool (spawn) whose workers import torch and step.
Prints `ITERATIONS <n>`."""
import multiprocessing as mp
import subprocess
import sys
from pathlib import Path

import torch


def side_job(k):
    m = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(8):
        m(torch.randn(2, 4)).sum().backward()
        opt.step()
    return k


if __name__ == "__main__":
    how, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 12
    if how == "subprocess":
        rc = subprocess.call([sys.executable, str(Path(__file__).with_name("plain_tensors.py")), "autograd", "30"])
        assert rc == 0
    else:
        with mp.get_context("spawn").Pool(2) as pool:
            assert pool.map(side_job, range(2)) == [0, 1]
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 16), torch.randn(32, 4)
    for i in range(n):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("ITERATIONS", n)
