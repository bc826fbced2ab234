"""A torch.compile'd model whose blocks are checkpointed through super().__call__ (as Hugging Face's
GradientCheckpointingLayer does) and whose forward has one graph break of its own (a print):
prints `GRAPH_BREAKS <n>`, `FRAMES <n>` and `RECOMPILES <n>` as dynamo counted them, which must be
the same with and without perfcore run. argv[1]: the backend (eager: dynamo traces, nothing is
code-generated)."""

import sys

import torch
import torch.utils.checkpoint
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def __call__(self, x):
        return torch.utils.checkpoint.checkpoint(super().__call__, x, use_reentrant=False)

    def forward(self, x):
        h = torch.relu(self.a(x))
        print("", end="")  # a graph break of the script's own
        return self.b(h).to(torch.float32) + x.to(x.dtype)


def main(backend):
    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block(), nn.Linear(16, 4))
    compiled = torch.compile(model, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    for _ in range(6):
        loss = nn.functional.cross_entropy(compiled(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    from torch._dynamo.utils import counters

    breaks = sum(counters["graph_break"].values())
    print(f"GRAPH_BREAKS {breaks}", flush=True)
    print(f"FRAMES {counters['stats']['unique_graphs']}", flush=True)
    print(f"RECOMPILES {sum(counters['recompiles'].values())}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "eager")
