"""Workload factories for the triage tests (loaded as tests/workload_factories.py:NAME)."""
import time

import torch
from torch import nn

from perfcore.workloads import Workload


class SleepyData:
    """Each item costs `delay_s` of waiting (like a slow disk): workers overlap it, cores don't matter."""

    def __init__(self, n=256, delay_s=0.002, dim=32):
        self.n, self.delay_s, self.dim = n, delay_s, dim

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.delay_s)
        return torch.full((self.dim,), float(i % 7)), i % 4


class SpinModel(nn.Module):
    """Computes for a fixed `compute_s` (a CPU spin), so predicted and measured speedups are well defined."""

    def __init__(self, compute_s=0.004):
        super().__init__()
        self.compute_s = compute_s
        self.lin = nn.Linear(32, 4)

    def forward(self, x):
        t = time.perf_counter()
        while time.perf_counter() - t < self.compute_s:
            pass
        return self.lin(x)


def slow_loader():
    model = SpinModel()
    return Workload(dataset=SleepyData(delay_s=0.002), model=model, loss_fn=nn.CrossEntropyLoss(),
                    optimizer=torch.optim.SGD(model.parameters(), lr=0.01), batch_size=8, name="slow_loader")


class WaitModel(nn.Module):
    """The device computes for `compute_s` while the host waits, as a GPU step's host does. On a busy
    host the wait ends up to a scheduler tick late, never early, and the host, having used little CPU,
    is run when it wakes and fetches the next batch in one go (99% of fetches here; a CPU spin spends
    the host's share, and 2-11% of the fetches after it wait 9-13 ms for a neighbour's time slice)."""

    def __init__(self, compute_s):
        super().__init__()
        self.compute_s = compute_s
        self.lin = nn.Linear(32, 4)

    def forward(self, x):
        time.sleep(self.compute_s)
        return self.lin(x)


def compute_bound(compute_s=0.100):
    from torch.utils.data import TensorDataset

    model = WaitModel(compute_s=compute_s)
    data = TensorDataset(torch.randn(1024, 32), torch.randint(0, 4, (1024,)))
    return Workload(dataset=data, model=model, loss_fn=nn.CrossEntropyLoss(),
                    optimizer=torch.optim.SGD(model.parameters(), lr=0.01), batch_size=64, name="compute_bound")


class OomAbove(nn.Module):
    """Raises torch.OutOfMemoryError for batches larger than `limit`, as a GPU would."""

    def __init__(self, limit):
        super().__init__()
        self.limit = limit
        self.lin = nn.Linear(32, 4)

    def forward(self, x):
        if x.shape[0] > self.limit:
            raise torch.OutOfMemoryError(f"simulated: batch {x.shape[0]} does not fit")
        return self.lin(x)


def oom_above_8():
    model = OomAbove(8)
    return Workload(dataset=SleepyData(delay_s=0.0), model=model, loss_fn=nn.CrossEntropyLoss(),
                    optimizer=torch.optim.SGD(model.parameters(), lr=0.01), batch_size=8, name="oom_above_8")


def not_a_workload():
    return {"model": None}
