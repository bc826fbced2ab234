"""Input-bound training: two DataLoader workers that read each batch slowly (a sleep standing for
remote storage, or a PIL JPEG decode with --decode) while the model trains on it in a fraction of that
time, so the GPU waits for data. Prints its truth as one JSON line (meter.py)."""

import argparse
import io
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from meter import Meter, common_args, device_of, train_loop, trainer


class Shards(Dataset):
    """One batch per index: its read is a sleep of read_ms, or decoding `decode` JPEGs with PIL."""

    def __init__(self, n, batch, features, read_ms, decode):
        self.n, self.batch, self.features, self.read_ms, self.decode = n, batch, features, read_ms, decode
        self.jpeg = None
        if decode:
            from PIL import Image

            buf = io.BytesIO()
            Image.effect_noise((224, 224), 64).convert("RGB").save(buf, format="JPEG", quality=90)
            self.jpeg = buf.getvalue()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.jpeg is not None:
            from PIL import Image

            for _ in range(self.decode):
                Image.open(io.BytesIO(self.jpeg)).convert("RGB").load()
        else:
            time.sleep(self.read_ms / 1e3)
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.batch, self.features, generator=g), torch.randint(0, 10, (self.batch,), generator=g)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(p, steps=60)
    p.add_argument("--read-ms", type=float, default=40.0, help="a batch's read (the sleep) in a worker")
    p.add_argument("--decode", type=int, default=0, help="decode this many 224x224 JPEGs a batch instead of sleeping")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--width", type=int, default=0, help="hidden width (default 4096 on a GPU, 64 on the CPU)")
    p.add_argument("--batch", type=int, default=0, help="rows a batch (default 256 on a GPU, 32 on the CPU)")
    args = p.parse_args()
    dev = device_of(args.device)
    gpu = dev.type == "cuda"
    width = args.width or (4096 if gpu else 64)
    batch = args.batch or (256 if gpu else 32)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    model = model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loader = DataLoader(
        Shards(args.steps, batch, 512, args.read_ms, args.decode), batch_size=None, num_workers=args.workers
    )
    meter = Meter("input_bound", dev, args.warmup)

    train = trainer(meter, model, opt, nn.functional.cross_entropy)
    it = iter(loader)
    train_loop(meter, args.steps, train, lambda step: meter.fetch(it), lambda b: [t.to(dev) for t in b])
    meter.report()


if __name__ == "__main__":
    main()
