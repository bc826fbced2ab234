"""A loop that trains for a few seconds (so its progress file counts its steps), then finds the disk full:
`fill DIR` fills the disk DIR is on; `inject` makes every later file replacement fail with ENOSPC, as a full
disk does when perfcore writes the script's part at exit. Exits 3."""
import errno
import os
import sys
import time

import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
t0 = time.monotonic()
while time.monotonic() - t0 < 3.0:
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    time.sleep(0.005)
if sys.argv[1] == "fill":
    try:
        with open(os.path.join(sys.argv[2], "filler.bin"), "wb") as fh:
            while True:
                fh.write(b"x" * 65536)
                fh.flush()
    except OSError:
        pass
else:
    def full(*args, **kw):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    os.replace = os.rename = full
sys.exit(3)
