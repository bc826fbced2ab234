"""A small CPU training script for trying perfcore: a DataLoader whose items cost some CPU work,
a two-layer MLP, SGD. `python train_small.py [STEPS] [NUM_WORKERS]`; runs anywhere torch does."""
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Noisy(Dataset):
    """Each item is made on the fly with some CPU work, as decoding an image would be."""

    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(256, generator=g)
        for _ in range(20):  # a stand-in for decode and augmentation
            x = torch.tanh(x * 1.01)
        return x, i % 10


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Noisy(), batch_size=32, num_workers=workers, shuffle=True)
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 >= steps:
            break
    print(f"trained {steps} steps, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
