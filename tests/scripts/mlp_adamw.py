"""A compute-bound CPU MLP with AdamW in its default (per-parameter loop) form: the optimizer step is about
half of each step, so its fused form is the change to make."""
import torch

torch.set_num_threads(1)  # two shared cores: intra-op threads would only add contention
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(6)])
opt = torch.optim.AdamW(model.parameters())
x = torch.randn(8, 512)
for _ in range(60):
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
