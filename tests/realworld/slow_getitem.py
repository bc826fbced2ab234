"""A tabular/feature model whose Dataset does its feature engineering in __getitem__ (numpy work per
row, as people write it), 2 workers without persistent_workers, short epochs, 2 micro-batches per
optimizer step."""
import argparse

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class FeatureDataset(Dataset):
    def __init__(self, n=512, raw=2000):
        rng = np.random.default_rng(0)
        self.raw = rng.normal(size=(n, raw)).astype(np.float32)
        self.y = rng.integers(0, 2, n)

    def __len__(self):
        return len(self.raw)

    def __getitem__(self, i):
        r = self.raw[i]
        feats = []
        for w in (5, 10, 20, 50):  # rolling statistics, written the straightforward way
            c = np.convolve(r, np.ones(w) / w, mode="valid")
            feats += [c.mean(), c.std(), np.percentile(c, 10), np.percentile(c, 90)]
        spec = np.abs(np.fft.rfft(r))[:64]
        x = np.concatenate([np.array(feats, dtype=np.float32), spec.astype(np.float32)])
        return torch.from_numpy(x), int(self.y[i])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--accum", type=int, default=2)
    args = p.parse_args()
    ds = FeatureDataset()
    loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=args.workers)
    model = nn.Sequential(nn.Linear(80, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2))
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    for epoch in range(args.epochs):
        total = 0.0
        for step, (x, y) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(x), y) / args.accum
            loss.backward()
            if (step + 1) % args.accum == 0:
                opt.step()
                opt.zero_grad()
            total += loss.item()
        print(f"epoch {epoch}: loss {total / len(loader):.4f}")


if __name__ == "__main__":
    main()
