"""A host-bound CPU training loop: per-sample metrics computed in Python with `.item()` calls.

The truth for tests: main() returns each step's [start, end) on perfcore's clock and the ns spent
inside per_sample_metrics in each step, measured around the call.
"""
import time

import torch


def per_sample_metrics(logits, target):
    stats = []
    for i in range(logits.shape[0]):
        p = logits[i].softmax(0)
        stats.append((p.max().item(), float(p[target[i]].item()), int(logits[i].argmax().item() == target[i].item())))
    return stats


def main(steps=40, batch=48):
    torch.manual_seed(0)
    torch.set_num_threads(1)  # two shared cores: intra-op threads would only add contention
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(batch, 32), torch.randint(0, 10, (batch,))
    starts, ends, metric_ns = [], [], []
    for _ in range(steps):
        t0 = time.perf_counter_ns()
        loss = torch.nn.functional.cross_entropy(logits := model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        m0 = time.perf_counter_ns()
        per_sample_metrics(logits.detach(), y)
        metric_ns.append(time.perf_counter_ns() - m0)
        starts.append(t0)
        ends.append(time.perf_counter_ns())
    return starts, ends, metric_ns


if __name__ == "__main__":
    import sys

    s, e, m = main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
    print(f"{sum(m) / sum(b - a for a, b in zip(s, e)):.2f} of the step in per_sample_metrics")
