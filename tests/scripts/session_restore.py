"""Two trainer-callback sessions (perfcore.integrations.session) around short training loops, then
what a user does next in the same process: checks that every attribute perfcore patched is torch's
own object again and that no optimizer hook is left, then torch.compile on a module and a function.
Prints `STEPS <n>` per session, `NOT_RESTORED <list>`, `HOOKS_LEFT <n>` and `COMPILED <shape>`."""
import torch
import torch.optim.optimizer as optim_mod

from perfcore.integrations.session import Session
from perfcore.run.child.hooks import patched_slots

slots = patched_slots(torch)
before = [(owner, attr, vars(owner).get(attr)) for owner, attr in slots]
hooks_before = len(optim_mod._global_optimizer_pre_hooks) + len(optim_mod._global_optimizer_post_hooks)
for session in range(2):
    s = Session(warmup=1).start()
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(20, 4)), batch_size=4)
    model.train()
    for (x,) in loader:
        model(x.to("cpu")).sum().backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    r = s.finish()
    print("STEPS", r.steps + r.warmup_steps)
print("NOT_RESTORED", [f"{getattr(o, '__name__', o)}.{a}" for o, a, v in before if vars(o).get(a) is not v])
print("HOOKS_LEFT", len(optim_mod._global_optimizer_pre_hooks) + len(optim_mod._global_optimizer_post_hooks)
      - hooks_before)
compiled = torch.compile(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()), backend="eager")
fn = torch.compile(lambda t: torch.sin(t) * 2, backend="eager")
print("COMPILED", tuple(compiled(torch.randn(3, 4)).shape), tuple(fn(torch.randn(5)).shape))
