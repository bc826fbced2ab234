"""Run as `python -m toypkg.train`: a loop with no optimizer (inference), so each batch fetch is a step."""
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    model = torch.nn.Linear(16, 4)
    dl = DataLoader(TensorDataset(torch.randn(96, 16)), batch_size=8)
    with torch.no_grad():
        for (x,) in dl:
            time.sleep(0.004)
            model(x)
