"""Launch-bound training: a deep chain of elementwise layers on small tensors, hundreds of tiny kernels a
step, so the GPU waits for the host to launch them. Each layer is one kernel forward, two backward (one
for the first) and one in the optimizer (SGD, foreach=False): about 4 x layers + 5 kernels a step.
--torch-profiler runs the same loop under torch.profiler (CPU and CUDA activity), the tool perfcore's
tracing cost is compared with. Prints its truth as one JSON line (meter.py)."""

import argparse
import contextlib

import torch
from torch import nn

from meter import Meter, common_args, device_of, train_loop, trainer


class Chain(nn.Module):
    def __init__(self, layers, size):
        super().__init__()
        self.w = nn.ParameterList([nn.Parameter(1 + 0.01 * torch.randn(size)) for _ in range(layers)])

    def forward(self, x):
        for w in self.w:
            x = x * w
        return x


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(p, steps=80)
    p.add_argument("--layers", type=int, default=0, help="layers (default 150 on a GPU: ~600 kernels; 20 on the CPU)")
    p.add_argument("--size", type=int, default=4096, help="elements a tensor")
    p.add_argument("--torch-profiler", action="store_true", help="run the loop under torch.profiler")
    args = p.parse_args()
    dev = device_of(args.device)
    layers = args.layers or (150 if dev.type == "cuda" else 20)
    torch.manual_seed(0)
    model = Chain(layers, args.size).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6, foreach=False)
    data = [torch.randn(args.size, device=dev) for _ in range(4)]
    meter = Meter("launch_bound_profiled" if args.torch_profiler else "launch_bound", dev, args.warmup)

    train = trainer(meter, model, opt, lambda out: out.square().mean())
    prof = contextlib.nullcontext()
    if args.torch_profiler:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        prof = profile(activities=acts)
    with prof:
        train_loop(meter, args.steps, train, lambda step: (data[step % len(data)],))
    meter.report(launches=4 * layers + 5, layers=layers)


if __name__ == "__main__":
    main()
