"""Decode cost of a torch-like record mix through the real libcupti walk (no GPU): per training
step, with every runtime/driver call recorded vs with the non-launching calls turned off.

    python bench/bench_decode_mix.py [--steps 2000]

The mix per step is modelled on a small training step: 60 kernels and 2 copies, each launched by
one runtime call with its external-correlation record; plus, when unfiltered, the calls torch
makes around them (about 3 cudaGetDevice / cuCtxGetCurrent-like calls per launch, each an API
record and, inside a tagged phase, an external-correlation record). Prints ns per step both ways
and their ratio, measured side by side in one run (median of 5).
"""

from __future__ import annotations

import argparse
import statistics
import time

KERNELS, COPIES, NOISE_PER_LAUNCH = 60, 2, 3


def build(C, steps: int, noisy: bool):
    bufs, cur, corr, t = [], None, 0, 1000
    for s in range(steps):
        if cur is None or cur.size_bytes > (7 << 20):
            cur = C._FakeActivityBuffer()
            bufs.append(cur)
        for i in range(KERNELS + COPIES):
            for _ in range(NOISE_PER_LAUNCH if noisy else 0):
                corr += 1
                cur.add_external_correlation(16, corr)
                cur.add_api(False, t, t + 1, corr, 1, 17)  # cudaGetDevice
                t += 2
            corr += 1
            cur.add_external_correlation(16, corr)
            cur.add_api(False, t, t + 3, corr, 1, 211)  # cudaLaunchKernel
            if i < KERNELS:
                cur.add_kernel(t + 5, t + 50, 0, 7, corr, "k", 1, 1)
            else:
                cur.add_memcpy(t + 5, t + 50, 4096, 1, 2, 3, 0, 7, corr)
            t += 60
    return bufs


def decode_ns(C, bufs) -> tuple[int, int]:
    pool = C._ActivityBuffers(buffer_bytes=8 << 20, max_buffers=2)
    t0 = time.perf_counter_ns()
    records = 0
    for b in bufs:
        pool.deliver(b)
        pool.decode_ready()
        records += pool.take()["records"]
    return time.perf_counter_ns() - t0, records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    from perfcore._native import native

    C = native()
    noisy, quiet = build(C, args.steps, True), build(C, args.steps, False)
    a, b = [], []
    for _ in range(5):
        ns, rn = decode_ns(C, noisy)
        a.append(ns)
        ns, rq = decode_ns(C, quiet)
        b.append(ns)
    na, nb = statistics.median(a) / args.steps, statistics.median(b) / args.steps
    print(f"records per step: all API calls {rn / args.steps:.0f}, filtered {rq / args.steps:.0f}")
    print(f"decode per step: all API calls {na / 1e3:.1f} us, filtered {nb / 1e3:.1f} us ({na / nb:.2f}x)")


if __name__ == "__main__":
    main()
