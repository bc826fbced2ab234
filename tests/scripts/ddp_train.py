"""A small DDP training script (gloo, CPU) as torchrun runs it. Rank `--slow-rank`'s data loads
slower by construction; `--crash-rank` raises at step `--crash-at`. Under srun without torchrun it
takes its rank from Slurm's variables, as Slurm scripts do."""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Slow(nn.Module):
    """Holds a forward up by `delay` seconds: a rank whose compute is slower (a slower device, more work)."""

    def __init__(self, delay):
        super().__init__()
        self.delay = delay

    def forward(self, x):
        if self.delay:
            time.sleep(self.delay)
        return x


class Data(Dataset):
    def __init__(self, n, delay):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), i % 4


def mark(what, rank, folder):
    if folder:
        open(os.path.join(folder, f"{what}{rank}"), "w").close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--delay", type=float, default=0.0025)
    p.add_argument("--compute-delay", type=float, default=0.0, help="seconds the slow rank's forward takes longer")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--hidden", type=int, default=256, help="the hidden layer's width: compute per item")
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--crash-at", type=int, default=10)
    p.add_argument("--hard", action="store_true", help="die by SIGKILL (as the OOM killer does): no cleanup at all")
    p.add_argument("--marks", help="a folder where each rank leaves start<N> as it enters its training loop, end<N> as it leaves it")
    args = p.parse_args()
    if "RANK" not in os.environ and "SLURM_PROCID" in os.environ:
        # Under srun (no torchrun), as Slurm scripts do: torch's env:// reads RANK and WORLD_SIZE.
        os.environ.update(RANK=os.environ["SLURM_PROCID"], WORLD_SIZE=os.environ["SLURM_NTASKS"],
                          LOCAL_RANK=os.environ.get("SLURM_LOCALID", "0"))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    slow = args.compute_delay if rank == args.slow_rank else 0.0
    model = DDP(nn.Sequential(nn.Linear(64, args.hidden), Slow(slow), nn.ReLU(), nn.Linear(args.hidden, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ds = Data(args.steps * args.batch * dist.get_world_size(), args.delay if rank == args.slow_rank and not slow else 0.0)
    loader = DataLoader(ds, batch_size=args.batch, sampler=DistributedSampler(ds, shuffle=False))
    mark("start", rank, args.marks)
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == args.crash_rank and step == args.crash_at:
            if args.hard:
                os.kill(os.getpid(), 9)
            raise RuntimeError(f"rank {rank} crashed on purpose")
    mark("end", rank, args.marks)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
