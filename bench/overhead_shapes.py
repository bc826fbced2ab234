"""The loop shapes the overhead bench measures (bench/overhead_train.py runs one; not perfcore-aware).

Most shapes are make() -> (loader, step): the loop is `for batch in loader: step(batch)`, timed per step by
the caller. A shape whose library owns the loop (a Trainer) is make() -> Owned(run), run(steps, tick)
training `steps` steps and calling tick() at each step's end. The shapes are the ones users have, not only
the friendly MLP:

  mlp     3-layer MLP, batch 32, a TensorDataset DataLoader (~2 ms): the original bench loop
  pil0    a Dataset decoding JPEGs with PIL in __getitem__, num_workers=0, a small CNN (~10-30 ms)
  pil2    the same with num_workers=2
  host    a host-heavy loop: per-sample `.item()` metrics and Python bookkeeping every step (~4 ms)
  tiny    2-layer MLP, batch 16, no DataLoader (~0.25 ms): where a fixed cost per step shows most
  infer   forward only under no_grad, model.eval(), over a DataLoader (no optimizer: steps are batches)
  fabric  Lightning Fabric's image_classifier example: MNIST-sized digits through torchvision's PIL
          transforms in the main process, its CNN set up by Fabric, fabric.backward, Adadelta (~25 ms)
  hf      a Hugging Face Trainer fine-tuning a small BERT classifier, its own loop and collator (~10 ms)
"""

from __future__ import annotations

import io

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

__all__ = ["SHAPES", "Owned", "make"]


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


class Digits(Dataset):
    """MNIST as torchvision.datasets.MNIST serves it, without the download: 28x28 uint8 images held in
    memory, each item made a PIL image and put through the transforms (ToTensor, Normalize)."""

    def __init__(self, n: int = 6000, transform=None):
        g = torch.Generator().manual_seed(0)
        self.data = (torch.rand(n, 28, 28, generator=g) * 255).to(torch.uint8)
        self.targets = torch.randint(0, 10, (n,), generator=g)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i):
        from PIL import Image

        img, target = self.data[i], int(self.targets[i])
        img = Image.fromarray(img.numpy(), mode="L")
        return self.transform(img) if self.transform is not None else img, target


class _FabricNet(nn.Module):
    """The image_classifier example's network (lightning/examples/fabric/image_classifier)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.flatten(self.dropout1(nn.functional.max_pool2d(x, 2)), 1)
        x = self.dropout2(torch.relu(self.fc1(x)))
        return nn.functional.log_softmax(self.fc2(x), dim=1)


# glibc's malloc, fixed: large blocks (up to the most mallopt allows) come from the heap, which is never given
# back. By default a block above the mmap threshold is mapped fresh and unmapped when freed, and the threshold
# and the heap's trimming move with the process's own history of frees: the fabric step's 5-10 MB activations
# then cost one process 1 page fault a step and another of the same script 9,298, and two uninstrumented
# processes differed by 10% in the same ring.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
STEADY_MMAP_THRESHOLD = 32 << 20  # glibc's largest on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)
STEADY_TRIM_THRESHOLD = 1 << 30


def steady_heap() -> bool:
    """The same allocations the same way in every process of a shape (every variant of a ring alike): a step's
    large buffers are reused from the heap after the first steps, not mapped, faulted and unmapped anew.
    False where the C library has no mallopt (not glibc): the shape then runs as it would."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, STEADY_MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, STEADY_TRIM_THRESHOLD))


def _fabric():
    from lightning.fabric import Fabric
    from torchvision import transforms

    steady_heap()
    fabric = Fabric(accelerator="cpu", devices=1)
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    net = _FabricNet()
    model, opt = fabric.setup(net, torch.optim.Adadelta(net.parameters(), lr=1.0))
    loader = fabric.setup_dataloaders(DataLoader(Digits(transform=transform), batch_size=64))
    logged: list[float] = []

    def step(batch):
        data, target = batch
        opt.zero_grad()
        loss = nn.functional.nll_loss(model(data), target)
        fabric.backward(loss)
        opt.step()
        if len(logged) % 10 == 0:  # the example prints the loss every log_interval (10) batches
            logged.append(loss.item())
        else:
            logged.append(0.0)

    return loader, step


class Owned:
    """A shape whose library runs the loop: run(steps, tick) trains `steps` steps, tick() at each end."""

    def __init__(self, run):
        self.run = run


def _hf():
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

    config = BertConfig(
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        num_labels=2,
    )
    g = torch.Generator().manual_seed(0)
    train = [{"input_ids": torch.randint(0, 1000, (32,), generator=g), "labels": i % 2} for i in range(512)]

    def run(steps: int, tick) -> None:
        import tempfile

        class Tick(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                tick()

        with tempfile.TemporaryDirectory(prefix="bench-hf-") as out:
            targs = TrainingArguments(
                output_dir=out,
                per_device_train_batch_size=16,
                max_steps=steps,
                learning_rate=1e-3,
                logging_steps=50,
                report_to=[],
                save_strategy="no",
                use_cpu=True,
                disable_tqdm=True,
                dataloader_num_workers=0,
            )
            model = BertForSequenceClassification(config)
            Trainer(model=model, args=targs, train_dataset=train, callbacks=[Tick()]).train()

    return Owned(run)


SHAPES = {
    "mlp": _mlp,
    "pil0": _pil(0),
    "pil2": _pil(2),
    "host": _host,
    "tiny": _tiny,
    "infer": _infer,
    "fabric": _fabric,
    "hf": _hf,
}


def make(shape: str, threads: int = 1):
    """(loader, step) of a shape, or its Owned loop, seeded; on `threads` intra-op threads (0: torch's
    default, one a core, as the examples leave it)."""
    torch.manual_seed(0)
    if threads:
        torch.set_num_threads(threads)
    return SHAPES[shape]()
