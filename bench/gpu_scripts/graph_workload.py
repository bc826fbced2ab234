"""A launch-bound MLP as a perfcore workload factory, for `perfcore graph FILE.py:make` on the device:
20 small layers on batches of 8, where a CUDA Graph replay saves most of each step's launches."""

import torch
from torch import nn
from torch.utils.data import TensorDataset

import perfcore


def make():
    torch.manual_seed(0)
    layers = [m for _ in range(20) for m in (nn.Linear(64, 64), nn.ReLU())]
    model = nn.Sequential(*layers)
    data = TensorDataset(torch.randn(512, 64), torch.randn(512, 64))
    return perfcore.Workload(
        dataset=data,
        model=model,
        loss_fn=nn.functional.mse_loss,
        optimizer=torch.optim.SGD(model.parameters(), lr=1e-3),
        batch_size=8,
        name="graph_mlp",
    )
