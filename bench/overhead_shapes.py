"""The loop shapes the overhead bench measures (bench/overhead_train.py runs one; not perfcore-aware).

Each shape is make() -> (loader, step): the loop is `for batch in loader: step(batch)`, timed per step by
the caller. The shapes are the ones users have, not only the friendly MLP:

  mlp     3-layer MLP, batch 32, a TensorDataset DataLoader (~2 ms): the original bench loop
  pil0    a Dataset decoding JPEGs with PIL in __getitem__, num_workers=0, a small CNN (~10-30 ms)
  pil2    the same with num_workers=2
  host    a host-heavy loop: per-sample `.item()` metrics and Python bookkeeping every step (~4 ms)
  tiny    2-layer MLP, batch 16, no DataLoader (~0.25 ms): where a fixed cost per step shows most
  infer   forward only under no_grad, model.eval(), over a DataLoader (no optimizer: steps are batches)
"""

from __future__ import annotations

import io

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

__all__ = ["SHAPES", "make"]


def _mlp():
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(256 * 32, 256), torch.randint(0, 10, (256 * 32,)))
    crit = nn.CrossEntropyLoss()

    def step(batch):
        x, y = batch
        loss = crit(model(x.to("cpu")), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return DataLoader(data, batch_size=32, shuffle=True), step


class JpegDataset(Dataset):
    """64 distinct 96x96 JPEGs held as bytes; each item is decoded with PIL and turned into a tensor."""

    def __init__(self, n: int = 64, size: int = 96):
        from PIL import Image

        g = torch.Generator().manual_seed(0)
        self.blobs = []
        for _ in range(n):
            arr = (torch.rand(size, size, 3, generator=g) * 255).to(torch.uint8).numpy()
            buf = io.BytesIO()
            Image.fromarray(arr).save(buf, format="JPEG", quality=90)
            self.blobs.append(buf.getvalue())

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i):
        import numpy as np
        from PIL import Image

        img = Image.open(io.BytesIO(self.blobs[i % len(self.blobs)])).convert("RGB").resize((64, 64))
        x = torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).permute(2, 0, 1).float().div_(255)
        return x, i % 10


def _pil(workers: int):
    def make():
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, 10),
        )
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        crit = nn.CrossEntropyLoss()

        def step(batch):
            x, y = batch
            loss = crit(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

        kw = {"persistent_workers": True} if workers else {}
        return DataLoader(JpegDataset(), batch_size=16, shuffle=False, num_workers=workers, **kw), step

    return make


def _host():
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(64 * 64, 128), torch.randint(0, 10, (64 * 64,)))
    crit = nn.CrossEntropyLoss()
    history: list[dict] = []

    def step(batch):
        x, y = batch
        out = model(x)
        loss = crit(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        # Per-sample metrics in Python, the way many scripts log them.
        pred = out.argmax(1)
        correct, conf = 0, 0.0
        for i in range(len(y)):
            correct += int((pred[i] == y[i]).item())
            conf += out[i, pred[i]].item()
        history.append({"loss": loss.item(), "acc": correct / len(y), "conf": conf / len(y)})
        if len(history) > 1000:
            del history[:500]

    return DataLoader(data, batch_size=64, shuffle=True), step


class _Repeat:
    """The same batch forever: a loop with no DataLoader."""

    def __init__(self, batch):
        self.batch = batch

    def __iter__(self):
        while True:
            yield self.batch


def _tiny():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step(batch):
        x, y = batch
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return _Repeat((torch.randn(16, 32), torch.randn(16, 1))), step


def _infer():
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    model.eval()
    data = TensorDataset(torch.randn(64 * 32, 256))

    def step(batch):
        with torch.no_grad():
            model(batch[0]).argmax(1)

    return DataLoader(data, batch_size=64), step


SHAPES = {"mlp": _mlp, "pil0": _pil(0), "pil2": _pil(2), "host": _host, "tiny": _tiny, "infer": _infer}


def make(shape: str):
    """(loader, step) of a shape, seeded, on one thread."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    return SHAPES[shape]()
