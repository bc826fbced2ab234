"""Mixed precision with a GradScaler (torch.amp): scaler.scale(loss).backward(), scaler.step(opt),
scaler.update(). When the gradients hold inf/nan the scaler skips optimizer.step() for that
iteration; --overflow-at makes that happen once, as an fp16 overflow would."""
import argparse

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--overflow-at", type=int, default=7)
    args = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    skipped = 0
    for it in range(args.iters):
        x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        if it == args.overflow_at:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        skipped += int(scaler.get_scale() < scale)
    print("ITERATIONS", args.iters, "SKIPPED", skipped)


if __name__ == "__main__":
    main()
