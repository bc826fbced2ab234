"""Training whose optimizer changes as it goes: `stages` (an LR-finder stage with its own optimizer,
then training with another), `layerwise` (pytorch/examples mnist_forward_forward: each layer trained
in turn with its own Adam, the next layer's input computed by the trained one), `per_epoch` (an
optimizer re-made at each epoch), `threads` (each stage in its own thread with its own optimizer,
one after the other). Prints `ITERATIONS <n>`: how many optimizer steps ran in all, one per
iteration."""

import sys
import threading

import torch

mode = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 8
torch.manual_seed(0)
torch.set_num_threads(1)
x, y = torch.randn(64, 16), torch.randn(64, 4)
iterations = 0
made = []  # every optimizer kept alive, as a trainer that holds each stage's would: none shares an address


def keep(opt):
    made.append(opt)
    return opt


def train(model, opt, steps, inputs=x):
    global iterations
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(inputs), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        iterations += 1


model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
if mode == "stages":
    train(model, keep(torch.optim.SGD(model.parameters(), lr=1e-4)), n // 2)  # the LR finder's short stage
    train(model, keep(torch.optim.Adam(model.parameters(), lr=1e-3)), n)
elif mode == "layerwise":
    layers = [torch.nn.Linear(16, 4), torch.nn.Linear(16, 4)]
    h = x
    for layer in layers:
        train(layer, keep(torch.optim.Adam(layer.parameters(), lr=1e-3)), n, inputs=h)
        with torch.no_grad():
            h = torch.cat([layer(h), layer(h), layer(h), layer(h)], dim=1)
elif mode == "per_epoch":
    for _epoch in range(3):
        train(model, keep(torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)), n)
elif mode == "threads":
    for _ in range(3):
        t = threading.Thread(target=train, args=(model, keep(torch.optim.SGD(model.parameters(), lr=1e-3)), n))
        t.start()
        t.join()
else:
    raise SystemExit(f"unknown mode {mode}")
print("ITERATIONS", iterations, flush=True)
