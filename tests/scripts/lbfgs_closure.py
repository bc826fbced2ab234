"""optimizer.step(closure) as torch's LBFGS wants it: forward, loss and backward run inside the
step, once or more per step. The forward and backward each take a known time (--forward-ms,
--backward-ms). Prints `ITERATIONS <n>` and `CLOSURE_CALLS <n>`."""
import argparse

import torch
from slow_model import Backbone


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--forward-ms", type=float, default=6.0)
    ap.add_argument("--backward-ms", type=float, default=4.0)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = Backbone(args.forward_ms / 1e3, args.backward_ms / 1e3)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=2)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    calls = 0
    for _ in range(args.steps):
        def closure():
            nonlocal calls
            calls += 1
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss

        opt.step(closure)
    print("ITERATIONS", args.steps)
    print("CLOSURE_CALLS", calls)


if __name__ == "__main__":
    main()
