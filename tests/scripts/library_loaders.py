"""Training whose loaders a library makes (timmlike.create_loader, like timm's train.py): the user's
own lines are the two create_loader calls. Prints `ITERATIONS <n>`."""
import torch
from timmlike import create_loader

train_loader = create_loader(64, 8, is_training=True)  # TRAIN_SITE
eval_loader = create_loader(32, 8, is_training=False)  # EVAL_SITE
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
n = 0
for epoch in range(2):
    model.train()
    for x, y in train_loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        n += 1
    model.eval()
    with torch.no_grad():
        for x, y in eval_loader:
            model(x)
print("ITERATIONS", n)
