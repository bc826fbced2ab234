"""A training script written the way people write them (argparse, an AverageMeter, epochs,
workers), not for perfcore. It prints its own data-time meter, which perfcore must agree with."""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, v):
        self.sum += v
        self.count += 1

    @property
    def avg(self):
        return self.sum / max(1, self.count)


class SlowImages(Dataset):
    def __init__(self, n, delay_s, size):
        self.n, self.delay_s, self.size = n, delay_s, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.delay_s)  # stands in for reading and decoding a file
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.size, generator=g), int(i % 10)


def main():
    p = argparse.ArgumentParser(description="toy classifier")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--delay", type=float, default=0.001)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--samples", type=int, default=320)
    p.add_argument("--crash-at", type=int, default=-1)
    args = p.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, args.width), nn.ReLU(), nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    crit = nn.CrossEntropyLoss()
    loader = DataLoader(SlowImages(args.samples, args.delay, 128), batch_size=args.batch_size,
                        num_workers=args.workers, shuffle=True)
    data_time, batch_time = AverageMeter(), AverageMeter()
    it_count = 0
    for epoch in range(args.epochs):
        end = time.perf_counter()
        for x, y in loader:
            data_time.update(time.perf_counter() - end)
            x, y = x.to("cpu"), y.to("cpu")
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            it_count += 1
            if it_count == args.crash_at:
                raise RuntimeError("simulated crash in the training loop")
            batch_time.update(time.perf_counter() - end)
            end = time.perf_counter()
        print(f"epoch {epoch} loss {loss.item():.3f} data {data_time.avg * 1e3:.2f} ms "
              f"batch {batch_time.avg * 1e3:.2f} ms", flush=True)
    print(f"DATA_SHARE {data_time.sum / batch_time.sum:.4f}")


if __name__ == "__main__":
    main()
