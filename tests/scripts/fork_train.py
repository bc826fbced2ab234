"""An optimizer made before the process forks, carried into a child that trains argv[2] steps:
argv[1] "os_fork" (os.fork(); the child ends with os._exit(0)) or "mp_fork" (multiprocessing's fork
start method, as mnist_hogwild with fork). The parent trains nothing: it waits for the child. The
child prints `CHILD_TRAINED <n>`."""

import multiprocessing as mp
import os
import sys

import torch

how = sys.argv[1] if len(sys.argv) > 1 else "os_fork"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 12
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 16), torch.randn(32, 4)


def train():
    for _ in range(n):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("CHILD_TRAINED", n, flush=True)


if __name__ == "__main__":
    if how == "os_fork":
        pid = os.fork()
        if pid == 0:
            train()
            os._exit(0)
        os.waitpid(pid, 0)
    else:
        child = mp.get_context("fork").Process(target=train)
        child.start()
        child.join()
