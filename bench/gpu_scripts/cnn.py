"""A small CNN on synthetic images on the GPU: DataLoader with 2 workers, pageable copies."""

import sys, time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Imgs(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.rand(3, 64, 64, generator=g), i % 10


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 80
    dev = "cuda"
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, 10),
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(Imgs(), batch_size=64, num_workers=2)
    t0 = time.perf_counter()
    for step, (x, y) in enumerate(loader):
        x, y = x.to(dev), y.to(dev)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 >= steps:
            break
    torch.cuda.synchronize()
    print(f"SCRIPT {steps} steps {1e3 * (time.perf_counter() - t0) / steps:.2f} ms/step loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
