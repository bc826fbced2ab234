"""Two models trained at once, each in its own thread (an ensemble), the main thread waiting for
both. Each thread prints `DONE <name> <iterations>` when its loop ends; the main thread prints
`JOINED` after both."""
import sys
import threading
import time

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
torch.set_num_threads(1)


def train(name):
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 16), torch.randn(32, 4)
    for i in range(n):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.005)
    print("DONE", name, n, flush=True)


threads = [threading.Thread(target=train, args=(name,)) for name in ("a", "b")]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("JOINED", flush=True)
