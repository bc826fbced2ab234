"""Transfer-bound training: large image batches from DataLoader workers copied to the GPU from pageable
memory, then a small convolution; --pin runs the same loop with pin_memory=True and
non_blocking=True copies (the change perfcore advises). Prints its truth as one JSON line (meter.py)."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from meter import Meter, common_args, device_of, train_loop, trainer


class Images(Dataset):
    """One batch per index, a view into batches made once (the workers share them by fork)."""

    def __init__(self, n, shape, distinct=4):
        g = torch.Generator().manual_seed(0)
        self.batches = [torch.rand(shape, generator=g) for _ in range(distinct)]
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.batches[i % len(self.batches)], torch.tensor(i % 10)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(p, steps=60)
    p.add_argument("--pin", action="store_true", help="pin_memory=True and non_blocking=True copies")
    p.add_argument("--batch", type=int, default=0, help="images a batch (default 64 on a GPU, 4 on the CPU)")
    p.add_argument("--side", type=int, default=0, help="image side (default 224 on a GPU, 64 on the CPU)")
    p.add_argument("--workers", type=int, default=0, help="DataLoader workers (default 4 on a GPU, 2 on the CPU)")
    args = p.parse_args()
    dev = device_of(args.device)
    gpu = dev.type == "cuda"
    batch, side = args.batch or (64 if gpu else 4), args.side or (224 if gpu else 64)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)
    )
    model = model.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = DataLoader(
        Images(args.steps, (batch, 3, side, side)),
        batch_size=None,
        num_workers=args.workers or (4 if gpu else 2),
        pin_memory=args.pin and gpu,
    )
    meter = Meter("transfer_pinned" if args.pin else "transfer_bound", dev, args.warmup)

    train = trainer(meter, model, opt, lambda out, y: nn.functional.cross_entropy(out, y.expand(out.shape[0])))
    it = iter(loader)
    copy = lambda b: [t.to(dev, non_blocking=args.pin) for t in b]  # noqa: E731
    train_loop(meter, args.steps, train, lambda step: meter.fetch(it), copy)
    meter.report(pinned=args.pin, batch_bytes=4 * batch * 3 * side * side)


if __name__ == "__main__":
    main()
