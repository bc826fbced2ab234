"""A small CNN on synthetic images: DataLoader with 2 workers, pageable copies, AdamW. Prints its truth
as one JSON line (meter.py) after the line the first device runs read (SCRIPT ...)."""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from meter import Meter, common_args, device_of, train_loop, trainer


class Imgs(Dataset):
    def __init__(self, side):
        self.side = side

    def __len__(self):
        return 100000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.rand(3, self.side, self.side, generator=g), i % 10


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(p, steps=80)
    p.add_argument("steps_pos", nargs="?", type=int, help="steps (the first device runs' form)")
    args = p.parse_args()
    steps = args.steps_pos or args.steps
    dev = device_of(args.device)
    gpu = dev.type == "cuda"
    side, batch = (64, 64) if gpu else (16, 8)
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
    loader = DataLoader(Imgs(side), batch_size=batch, num_workers=2)
    meter = Meter("cnn", dev, args.warmup)

    train = trainer(meter, model, opt, nn.functional.cross_entropy)
    it = iter(loader)
    t0 = time.perf_counter()
    train_loop(meter, steps, train, lambda step: meter.fetch(it), lambda b: [t.to(dev) for t in b])
    print(f"SCRIPT {steps} steps {1e3 * (time.perf_counter() - t0) / steps:.2f} ms/step")
    meter.report()


if __name__ == "__main__":
    main()
