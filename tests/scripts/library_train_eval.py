"""Training whose train and eval loaders a library makes (timmlike.create_loader, like timm's
train.py), evaluating every --eval-every steps under model.eval() and no_grad. An eval batch takes
longer to make than a train batch (--train-delay, --eval-delay: seconds per item), so figures that
mix the two show; --remake has the library make the train loader again over its dataset (as
Lightning does to add a distributed sampler). Prints `ITERATIONS <n>`."""
import argparse

import torch
from timmlike import create_loader, remake


def validate(model, loader):
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            model(x)
    model.train()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--eval-every", type=int, default=8)
    ap.add_argument("--train-delay", type=float, default=0.001)
    ap.add_argument("--eval-delay", type=float, default=0.004)
    ap.add_argument("--remake", action="store_true", help="the library makes the train loader again")
    args = ap.parse_args()
    train_loader = create_loader(args.steps * 8, 8, is_training=True, delay=args.train_delay)  # TRAIN_SITE
    eval_loader = create_loader(16, 8, is_training=False, delay=args.eval_delay)  # EVAL_SITE
    if args.remake:
        train_loader = remake(train_loader)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    n = 0
    for x, y in train_loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        n += 1
        if n % args.eval_every == 0:
            validate(model, eval_loader)
    print("ITERATIONS", n)


if __name__ == "__main__":
    main()
