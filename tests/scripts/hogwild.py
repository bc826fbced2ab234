"""pytorch/examples mnist_hogwild's shape: the model's parameters shared, argv[1] processes started
with torch.multiprocessing (spawn; argv[2] "fork": forked) each train it with their own optimizer, then the parent only
evaluates it (test(): no_grad over a test loader; argv[3] "notest": not even that). Each child prints
`TRAINED <steps>`."""

import sys

import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, TensorDataset


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def train(rank, model, steps):
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = DataLoader(TensorDataset(torch.randn(steps * 8, 16), torch.randint(0, 4, (steps * 8,))), batch_size=8)
    for x, y in data:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    # one write: the trainers share the pipe, and print writes each argument apart
    sys.stdout.write(f"TRAINED {steps}\n")
    sys.stdout.flush()


def test(model):
    data = DataLoader(TensorDataset(torch.randn(160, 16), torch.randint(0, 4, (160,))), batch_size=16)
    correct = 0
    with torch.no_grad():
        for x, y in data:
            correct += int((model(x).argmax(1) == y).sum())
    sys.stdout.write(f"TESTED {correct}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    mp.set_start_method(sys.argv[2] if len(sys.argv) > 2 else "spawn", force=True)
    model = make_model()
    model.share_memory()
    procs = [mp.Process(target=train, args=(rank, model, 24)) for rank in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if sys.argv[3:4] != ["notest"]:
        test(model)
