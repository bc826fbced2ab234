"""A small training loop that reaches torch the way real scripts do (argv[1]): `probe` asks
importlib.util.find_spec("torch") first (transformers, datasets and accelerate do), `transformers`
and `datasets` import those libraries before torch, `accelerate` gets torch through
accelerate.Accelerator, `import_module` uses importlib.import_module, `thread` imports torch in a
thread. Prints `ITERATIONS <n>`."""
import importlib
import importlib.util
import sys
import threading

how = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 12
if how == "probe":
    assert importlib.util.find_spec("torch") is not None
    import torch
elif how == "transformers":
    import transformers  # noqa: F401  (probes for torch the way its examples start)
    from transformers import set_seed

    set_seed(0)
    import torch
elif how == "datasets":
    import datasets  # noqa: F401

    import torch
elif how == "accelerate":
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    import torch
elif how == "import_module":
    torch = importlib.import_module("torch")
elif how == "thread":
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("torch", importlib.import_module("torch")))
    t.start()
    t.join()
    torch = box["torch"]
else:
    raise SystemExit(f"unknown way {how!r}")

torch.manual_seed(0)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
if how == "accelerate":
    model, opt = accelerator.prepare(model, opt)
x, y = torch.randn(32, 16), torch.randn(32, 4)
for i in range(n):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    if how == "accelerate":
        accelerator.backward(loss)
    else:
        loss.backward()
    opt.step()
print("ITERATIONS", n)
