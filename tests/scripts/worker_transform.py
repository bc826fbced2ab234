"""Workers that run an nn.Module as a transform (as torchvision's v2 transforms are), and report
whether perfcore's hooks were armed in them: they must not be (a forked worker is not the loop)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Data(Dataset):
    def __init__(self):
        self.transform = nn.Identity()

    def __len__(self):
        return 64

    def __getitem__(self, i):
        armed = 0
        try:
            from perfcore.run.child import instrument

            st = instrument.STATE
            armed = int(st is not None and (st.timer is not None or st.torch_hooks.installed["forward"].scope is not None))
        except ImportError:
            pass
        return self.transform(torch.full((8,), float(i))), armed


if __name__ == "__main__":
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    armed = 0
    loader = DataLoader(Data(), batch_size=8, num_workers=2, multiprocessing_context="fork")
    for epoch in range(2):  # the second epoch's workers fork after perfcore's timer exists
        for x, a in loader:
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            armed += int(a.sum())
    print("WORKER_HOOKS_ARMED", armed)
