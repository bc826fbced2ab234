"""The built-in workloads. `demo` is the embedded default: a folder of real JPEGs, generated once
and cached, decoded with PIL (the slow path) or torchvision.io.decode_jpeg, feeding a small CNN."""

from __future__ import annotations

import functools
import io
import os
import shutil
import tempfile
from pathlib import Path

from perfcore.workloads.workload import Workload

__all__ = ["demo", "resnet18", "resnet50", "vit_b_16", "jpeg_folder", "JpegDataset", "SyntheticImages", "SmallCNN"]

DEMO_VERSION = 1


def jpeg_folder(count: int = 512, size: int = 160, quality: int = 90) -> Path:
    """Makes `count` real JPEG files once (smooth colour fields with noise and shapes, so they
    compress like photos, not like flat colour) and returns their folder."""
    import numpy as np
    from PIL import Image

    cache = os.environ.get("PERFCORE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "perfcore")
    folder = Path(cache) / f"demo-jpeg-v{DEMO_VERSION}-{count}x{size}-q{quality}"
    if folder.is_dir() and len(list(folder.glob("*.jpg"))) == count:
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    for i in range(count):
        a, b, c = rng.uniform(0, 6.3, 3)
        img = np.stack([np.sin(xx * a * 3 + b), np.cos(yy * b * 3 + c), np.sin((xx + yy) * c * 2 + a)], -1)
        img = (img * 0.5 + 0.5) * 200 + rng.normal(0, 18, (size, size, 3))
        cy, cx, r = rng.uniform(0.2, 0.8, 2).tolist() + [rng.uniform(0.05, 0.2)]
        img[((yy - cy) ** 2 + (xx - cx) ** 2) < r * r] = rng.uniform(0, 255, 3)
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(tmp / f"{i:05d}.jpg", quality=quality)
    try:
        tmp.rename(folder)
    except OSError:  # another process made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


class JpegDataset:
    """Reads a JPEG file and decodes it on every access (as an image dataset does), then a random
    crop and flip, as float CHW in [0, 1]. decoder: "pil" or "torchvision"."""

    def __init__(self, folder: Path, decoder: str = "pil", crop: int = 128, classes: int = 10):
        if decoder not in ("pil", "torchvision"):
            raise ValueError(f"decoder must be 'pil' or 'torchvision', got {decoder!r}")
        self.files = sorted(Path(folder).glob("*.jpg"))
        self.decoder, self.crop, self.classes = decoder, crop, classes

    def __len__(self) -> int:
        return len(self.files)

    def decode(self, data: bytes):
        import torch

        if self.decoder == "pil":
            import numpy as np
            from PIL import Image

            arr = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
            return torch.from_numpy(arr.copy()).permute(2, 0, 1)
        from torchvision.io import decode_jpeg

        return decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8))

    def __getitem__(self, i: int):
        import torch

        data = self.files[i].read_bytes()
        img = self.decode(data)
        _, h, w = img.shape
        g = torch.Generator().manual_seed(i)
        top = int(torch.randint(0, h - self.crop + 1, (1,), generator=g))
        left = int(torch.randint(0, w - self.crop + 1, (1,), generator=g))
        img = img[:, top : top + self.crop, left : left + self.crop]
        if bool(torch.rand(1, generator=g) < 0.5):
            img = img.flip(-1)
        return img.float().div_(255), i % self.classes


class SyntheticImages:
    """Random images made per access (no files): for model-bound built-ins."""

    def __init__(self, n: int = 2048, size: int = 224, classes: int = 1000):
        self.n, self.size, self.classes = n, size, classes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        import torch

        g = torch.Generator().manual_seed(i)
        return torch.rand(3, self.size, self.size, generator=g), i % self.classes


def SmallCNN(classes: int = 10):
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(inplace=True),
        nn.Conv2d(32, 64, 3, stride=2, padding=1),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, classes),
    )


def _has_torchvision() -> bool:
    try:
        import torchvision  # noqa: F401

        return True
    except Exception:
        return False


def _trained(dataset, model, **settings) -> Workload:
    """A built-in workload: the model trained with cross-entropy and SGD with momentum."""
    import torch

    return Workload(
        dataset=dataset,
        model=model,
        loss_fn=torch.nn.CrossEntropyLoss(),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
        **settings,
    )


def demo(
    count: int = 256, size: int = 320, batch_size: int = 16, num_workers: int = 0, decoder: str = "pil"
) -> Workload:
    folder = jpeg_folder(count, size)
    decoders = {"pil": JpegDataset(folder, "pil")}
    if _has_torchvision():
        decoders["torchvision"] = JpegDataset(folder, "torchvision")
    return _trained(
        decoders[decoder],
        SmallCNN(10),
        batch_size=batch_size,
        num_workers=num_workers,
        decoders=decoders,
        decoder=decoder,
        name="demo",
    )


def _vision(arch: str, batch_size: int = 32) -> Workload:
    """torchvision's `arch` untrained on synthetic 224x224 images (a small CNN without torchvision)."""
    if _has_torchvision():
        import torchvision

        model, name = getattr(torchvision.models, arch)(weights=None, num_classes=1000), arch
    else:
        model, name = SmallCNN(1000), f"{arch} (small CNN: torchvision not installed)"
    ds = SyntheticImages(n=4096, size=224, classes=1000)
    return _trained(ds, model, batch_size=batch_size, num_workers=min(4, os.cpu_count() or 1), name=name)


resnet18 = functools.partial(_vision, "resnet18")
resnet50 = functools.partial(_vision, "resnet50")
vit_b_16 = functools.partial(_vision, "vit_b_16")
