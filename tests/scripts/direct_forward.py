"""A loop that calls forward directly, as pytorch/examples' mnist_forward_forward does: each Layer
trains itself with `self.forward(x)` from a method of its own (argv[1] "self"), or the loop calls
`model.forward(x)` (argv[1] "model"). argv[2]: iterations. The forward's own matmuls are most of
each step, so the step is forward (compute) time, not host."""

import sys

import torch
from torch import nn

mode = sys.argv[1] if len(sys.argv) > 1 else "self"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
torch.manual_seed(0)
torch.set_num_threads(1)


class Layer(nn.Linear):
    def __init__(self, d_in, d_out):
        super().__init__(d_in, d_out)
        self.relu = nn.ReLU()
        self.opt = torch.optim.SGD(self.parameters(), lr=0.01)

    def forward(self, x):
        # Plain tensor ops, no submodule for most of the work: under __call__ alone this is host.
        for _ in range(8):
            x = torch.mm(x, self.weight.T) / 20.0
        return self.relu(x + self.bias)

    def train_layer(self, x):
        for _ in range(n):
            loss = self.forward(x).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


layer = Layer(512, 512)
x = torch.randn(256, 512)
if mode == "self":
    layer.train_layer(x)
else:
    for _ in range(n):
        loss = layer.forward(x).pow(2).mean()
        layer.opt.zero_grad()
        loss.backward()
        layer.opt.step()
print("ITERATIONS", n, flush=True)
