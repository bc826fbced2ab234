"""Ctrl-C while the loader fetches in the main process: the Dataset raises KeyboardInterrupt at sample 240
(as a Ctrl-C landing there would), which reaches the loop through perfcore's batch-fetch wrapper.
`value`: a ValueError of the Dataset's own there instead."""
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Interrupting(Dataset):
    def __len__(self):
        return 400

    def __getitem__(self, i):
        if i == 240:
            raise ValueError(f"bad sample {i}") if sys.argv[1:] == ["value"] else KeyboardInterrupt
        return torch.randn(4), torch.randn(1)


model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(Interrupting(), batch_size=8):
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    opt.zero_grad()
