"""A training loop that evaluates every N steps on a held-out loader (model.eval(), no_grad, then
model.train() again), as most training scripts do."""
import argparse
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __init__(self, n, delay):
        self.x, self.delay = torch.randn(n, 16), delay

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.delay)
        return self.x[i], int(self.x[i].sum() > 0)


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += int((model(x).argmax(1) == y).sum())
            total += len(y)
    model.train()
    return correct / total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--eval-every", type=int, default=8)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--val-delay", type=float, default=0.002)
    args = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader = DataLoader(Slow(args.steps * 8, 0.0), batch_size=8, shuffle=True)
    val_loader = DataLoader(Slow(96, args.val_delay), batch_size=16)
    model.train()
    for step, (x, y) in enumerate(train_loader, 1):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % args.eval_every == 0:
            print(f"step {step} val_acc {evaluate(model, val_loader):.3f}", flush=True)
    print("TRAIN_STEPS", step)


if __name__ == "__main__":
    main()
