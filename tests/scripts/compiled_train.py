"""A torch.compile'd model (dynamo traces through perfcore's hooks on nn.Module.__call__):
prints the final loss, which must be the same with and without perfcore run."""
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    compiled = torch.compile(model, backend=sys.argv[1] if len(sys.argv) > 1 else "eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,))), batch_size=16)
    for x, y in loader:
        loss = nn.functional.cross_entropy(compiled(x.to("cpu")), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"FINAL_LOSS {float(loss):.9f}")
