"""A training loop that evaluates every N steps on a held-out loader (model.eval(), no_grad, then
model.train() again), as most training scripts do; --how no_grad / inference_mode: the same pass
without model.eval() (super_resolution's test(), makemore's sampling)."""

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


def evaluate(model, loader, how="eval"):
    if how == "eval":
        model.eval()
    correct = total = 0
    with torch.inference_mode() if how == "inference_mode" else torch.no_grad():
        for x, y in loader:
            correct += int((model(x).argmax(1) == y).sum())
            total += len(y)
    if how == "eval":
        model.train()
    return correct / total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--eval-every", type=int, default=8)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--val-delay", type=float, default=0.002)
    p.add_argument("--how", choices=["eval", "no_grad", "inference_mode"], default="eval")
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
        with torch.no_grad():  # an update under no_grad that calls no module (an EMA's): not evaluation
            for p_ in model.parameters():
                p_.mul_(1.0)
        if step % args.eval_every == 0:
            print(f"step {step} val_acc {evaluate(model, val_loader, args.how):.3f}", flush=True)
    print("TRAIN_STEPS", step)


if __name__ == "__main__":
    main()
