"""Batch inference: model.eval(), torch.no_grad(), a DataLoader, predictions collected per batch."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=20)
    args = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 10))
    model.eval()
    loader = DataLoader(TensorDataset(torch.randn(args.samples, 32)), batch_size=args.batch_size)
    preds = []
    with torch.no_grad():
        for (x,) in loader:
            out = model(x)
            preds.append(out.argmax(dim=1))
    print("BATCHES", len(preds), "PREDICTIONS", torch.cat(preds).numel())


if __name__ == "__main__":
    main()
