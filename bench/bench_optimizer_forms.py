"""An optimizer step in its three forms: the per-parameter loop (foreach=False), foreach and fused,
on the device given, for AdamW over a small MLP's tensors (24 of 256x256 and smaller) and a large
one's (8 of 1024x1024 and 1024). The saved fractions against the loop are the bands of
analysis/compute_split.SAVED_FRACTION.

    python bench/bench_optimizer_forms.py [--device cpu|cuda] [--repeats 30]

Prints the median ms per optimizer.step() of each form and the fraction each saves.
"""

from __future__ import annotations

import argparse
import statistics
import time

SHAPES = {
    "mlp-small": [(256, 256), (256,), (256, 256), (256,), (10, 256), (10,)] * 4,
    "mlp-large": [(1024, 1024), (1024,)] * 4,
}


def step_ms(torch, device: str, shapes, repeats: int, **kw) -> float:
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*s, device=device)) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, **kw)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(5):
        opt.step()
    times = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        opt.step()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    import torch

    if args.device == "cpu":
        torch.set_num_threads(1)
    print(f"torch {torch.__version__}, AdamW on {args.device}: median ms per step, fraction saved against the loop")
    for name, shapes in SHAPES.items():
        loop = step_ms(torch, args.device, shapes, args.repeats, foreach=False)
        row = [f"{name:10s} loop {loop:8.3f}"]
        for kw in ("foreach", "fused"):
            ms = step_ms(torch, args.device, shapes, args.repeats, **{kw: True})
            row.append(f"{kw} {ms:8.3f} ({1 - ms / loop:.2f} saved)")
        print("  ".join(row))


if __name__ == "__main__":
    main()
