"""A model whose forward and backward each take a known time (sleeps), so a profiler's forward /
backward / optimizer split can be checked against them. On CPU, autograd runs the backward on the
thread that calls backward(), inside its hooks."""
import time

import torch


class SlowBackward(torch.autograd.Function):
    """Identity forward; its backward takes `delay` seconds."""

    @staticmethod
    def forward(ctx, x, delay):
        ctx.delay = delay
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.delay)
        return grad, None


class Backbone(torch.nn.Module):
    def __init__(self, forward_s, backward_s):
        super().__init__()
        self.forward_s, self.backward_s = forward_s, backward_s
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

    def forward(self, x):
        time.sleep(self.forward_s)
        return SlowBackward.apply(self.net(x), self.backward_s)


class SlowItems(torch.utils.data.Dataset):
    """(x, y) items that take `delay` seconds each to make (decoding, augmenting)."""

    def __init__(self, n, delay):
        g = torch.Generator().manual_seed(0)
        self.x, self.y, self.delay = torch.randn(n, 16, generator=g), torch.randn(n, generator=g), delay

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.delay)
        return self.x[i], self.y[i]
