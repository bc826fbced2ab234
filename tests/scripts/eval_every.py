"""A training loop that evaluates every N steps on a held-out loader (model.eval(), no_grad, then
model.train() again), as most training scripts do; --how no_grad / inference_mode: the same pass
without model.eval() (super_resolution's test(), makemore's sampling); --how plain: with neither eval()
nor no_grad, grad on (only the loader's batches with no step between them tell it); plain_break: the
same, leaving the loader after 4 batches (makemore's evaluate stops at max_batches)."""

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
    plain = how.startswith("plain")
    with torch.inference_mode() if how == "inference_mode" else torch.enable_grad() if plain else torch.no_grad():
        for i, (x, y) in enumerate(loader):
            correct += int((model(x).argmax(1) == y).sum())
            total += len(y)
            if how == "plain_break" and i == 3:
                break
    if how == "eval":
        model.train()
    return correct / total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--eval-every", type=int, default=8)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--val-delay", type=float, default=0.002)
    p.add_argument("--how", choices=["eval", "no_grad", "inference_mode", "plain", "plain_break"], default="eval")
    p.add_argument("--final-eval", action="store_true", help="one more pass after the last step, no train() after it")
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
    if args.final_eval:  # as the HF Trainer's evaluation at the last step: model.eval(), and the run ends
        model.eval()
        with torch.no_grad():
            for x, _ in val_loader:
                model(x)
    print("TRAIN_STEPS", step)


if __name__ == "__main__":
    main()
