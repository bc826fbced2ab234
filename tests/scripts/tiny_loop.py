"""A tiny training loop of N steps (argv[1]) that reports its own time and memory on stderr:
`LOOP <start> <end> RSS <at step 1000> <at step 10000> <at the end> CPU <s>` (RSS in bytes, 0 where
the loop was shorter), then `EVERY10K <RSS after each 10k steps>...`. Used to measure what perfcore
costs per step and over run length. argv[2], optional: torch's intra-op threads (default 1; 0 leaves
torch's own default, one a core, as most scripts do)."""
import os
import resource
import sys
import time

import torch

n = int(sys.argv[1])
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
if threads:
    torch.set_num_threads(threads)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 8)


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


r1 = r10k = 0
every = []
t0 = time.time()
for i in range(n):
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i == 999:
        r1 = rss()
    if i == 9999:
        r10k = rss()
    if i % 10_000 == 9_999:
        every.append(rss())
u = resource.getrusage(resource.RUSAGE_SELF)
print(f"LOOP {t0:.6f} {time.time():.6f} RSS {r1} {r10k} {rss()} CPU {u.ru_utime + u.ru_stime:.3f}", file=sys.stderr)
print("EVERY10K", *every, file=sys.stderr)
