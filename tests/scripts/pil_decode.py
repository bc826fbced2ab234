"""A main-process loader (num_workers=0) whose Dataset decodes JPEGs with PIL in __getitem__: load-bound,
and the decode line is where the load time goes."""
import io

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset


class Jpegs(Dataset):
    def __init__(self, n=64, size=256):
        rng = np.random.default_rng(0)
        self.blobs = []
        for _ in range(n):
            buf = io.BytesIO()
            Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(buf, "JPEG", quality=90)
            self.blobs.append(buf.getvalue())

    def __len__(self):
        return len(self.blobs)

    def __getitem__(self, i):
        img = Image.open(io.BytesIO(self.blobs[i])).convert("RGB").resize((64, 64))
        return torch.from_numpy(np.asarray(img, dtype=np.float32)).permute(2, 0, 1) / 255.0


def main(epochs=3):
    torch.set_num_threads(1)  # two shared cores: intra-op threads would only add contention
    loader = DataLoader(Jpegs(), batch_size=16, num_workers=0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 64 * 64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(epochs):
        for x in loader:
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main(12)
