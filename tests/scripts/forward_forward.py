"""pytorch/examples mnist_forward_forward's shape, on in-memory data of MNIST's form (no download):
one full batch from the train loader, each layer trained in turn with its own Adam through
`self.forward`, `net.train(x_pos, x_neg)` (a method that shadows nn.Module.train: eval() is never
called), then one batch from the test loader, predicted with grad on. argv[1]: steps per layer.
Prints `ITERATIONS <n>`."""
import sys

import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 40
torch.manual_seed(1234)
torch.set_num_threads(1)
iterations = 0


def loaders():
    x, y = torch.rand(1024, 64), torch.randint(0, 10, (1024,))
    xt, yt = torch.rand(256, 64), torch.randint(0, 10, (256,))
    train = DataLoader(TensorDataset(x, y), batch_size=1024, shuffle=True)
    test = DataLoader(TensorDataset(xt, yt), batch_size=256, shuffle=False)
    return train, test


def overlay_y_on_x(x, y):
    x_ = x.clone()
    x_[:, :10] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


class Layer(torch.nn.Linear):
    def __init__(self, d_in, d_out):
        super().__init__(d_in, d_out)
        self.relu = torch.nn.ReLU()
        self.opt = torch.optim.Adam(self.parameters(), lr=0.03)
        self.threshold = 2.0

    def forward(self, x):
        x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

    def train(self, x_pos, x_neg):
        global iterations
        for _ in range(epochs):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = F.softplus(torch.cat([-g_pos + self.threshold, g_neg - self.threshold])).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            iterations += 1
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()


class Net(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = [Layer(dims[d], dims[d + 1]) for d in range(len(dims) - 1)]

    def predict(self, x):
        per_label = []
        for label in range(10):
            h = overlay_y_on_x(x, label)
            goodness = []
            for layer in self.layers:
                h = layer(h)
                goodness += [h.pow(2).mean(1)]
            per_label += [sum(goodness).unsqueeze(1)]
        return torch.cat(per_label, 1).argmax(1)

    def train(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        for i, layer in enumerate(self.layers):
            print("training layer", i, "...")
            h_pos, h_neg = layer.train(h_pos, h_neg)


train_loader, test_loader = loaders()
net = Net([64, 128, 128])
x, y = next(iter(train_loader))
x_pos = overlay_y_on_x(x, y)
x_neg = overlay_y_on_x(x, y[torch.randperm(x.size(0))])
net.train(x_pos, x_neg)
print("train error:", 1.0 - net.predict(x).eq(y).float().mean().item())
x_te, y_te = next(iter(test_loader))
print("test error:", 1.0 - net.predict(x_te).eq(y_te).float().mean().item())
print("ITERATIONS", iterations, flush=True)
