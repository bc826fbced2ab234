"""Compute-bound training: an MLP of large square matrices on batches already on the device, so the GPU
is busy for most of each step (large matmuls). Prints its truth as one JSON line (meter.py)."""

import argparse

import torch
from torch import nn

from meter import Meter, common_args, device_of, train_loop, trainer


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(p, steps=40)
    p.add_argument("--width", type=int, default=0, help="matrix side (default 8192 on a GPU, 128 on the CPU)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=0, help="rows a batch (default: the width)")
    args = p.parse_args()
    dev = device_of(args.device)
    gpu = dev.type == "cuda"
    width = args.width or (8192 if gpu else 128)
    batch = args.batch or width
    dtype = torch.bfloat16 if gpu else torch.float32
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(args.layers)]).to(dev, dtype)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    data = [torch.randn(batch, width, device=dev, dtype=dtype) for _ in range(4)]
    meter = Meter("compute_bound", dev, args.warmup)

    train = trainer(meter, model, opt, lambda out: out.float().square().mean())
    train_loop(meter, args.steps, train, lambda step: (data[step % len(data)],))
    meter.report()


if __name__ == "__main__":
    main()
