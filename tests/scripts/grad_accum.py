"""Gradient accumulation as people write it: the loss divided by the accumulation steps, backward
every batch, optimizer.step() and zero_grad() every `accumulation_steps` batches."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 16)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], (self.x[i] ** 2).sum(0, keepdim=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--accumulation-steps", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--samples", type=int, default=384)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1)
    args = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = DataLoader(Squares(args.samples), batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    updates = 0
    for epoch in range(args.epochs):
        model.train()
        optimizer.zero_grad()
        for i, (inputs, labels) in enumerate(loader):
            loss = nn.functional.mse_loss(model(inputs), labels)
            loss = loss / args.accumulation_steps
            loss.backward()
            if (i + 1) % args.accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
                updates += 1
    print("UPDATES", updates)


if __name__ == "__main__":
    main()
