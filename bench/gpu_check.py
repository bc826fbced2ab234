"""One prepared run for a lent GPU machine: accuracy and cost of perfcore's GPU parts, as a table.

    bash bench/gpu_check.sh            # builds perfcore there, then runs this
    python bench/gpu_check.py [--json PATH]

Without a GPU it says so in one line and exits 3. Targets are from issue #2 and later issues;
every row prints the measured value next to its target.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time


def step_timer_costs(steps: int = 200, repeats: int = 5) -> dict:
    """Phase cost on the CUDA path, and a small-kernel training loop timed vs untimed (interleaved)."""
    import statistics

    import torch

    import perfcore

    timer = perfcore.StepTimer(device="cuda")
    n = 20000
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with timer.compute():
            pass
    cuda_phase = (time.perf_counter_ns() - t0) / n
    timer.summary()
    cpu_timer = perfcore.StepTimer(device="cpu")
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with cpu_timer.compute():
            pass
    cpu_phase = (time.perf_counter_ns() - t0) / n

    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = [torch.randn(64, 256).pin_memory() for _ in range(8)]

    def loop(timed: bool) -> float:
        t = perfcore.StepTimer(device="cuda", warmup=0) if timed else None
        it = t.load(range(steps)) if timed else range(steps)
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        for i in it:
            if timed:
                with t.transfer():
                    x = data[i % 8].cuda(non_blocking=True)
                with t.compute():
                    loss = model(x).square().mean()
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                t.step()
            else:
                x = data[i % 8].cuda(non_blocking=True)
                loss = model(x).square().mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        torch.cuda.synchronize()
        return (time.perf_counter_ns() - start) / steps / 1e6

    loop(False)
    loop(True)
    plain, timed = [], []
    for _ in range(repeats):
        plain.append(loop(False))
        timed.append(loop(True))
    p, q = statistics.median(plain), statistics.median(timed)
    return {"cuda_phase_ns": cuda_phase, "cpu_phase_ns": cpu_phase, "plain_ms": p, "timed_ms": q,
            "loop_overhead": (q - p) / p}


def graph_check(steps: int = 50) -> dict:
    """A launch-bound model (20 small layers, batch 8): eager vs captured step, and equal losses."""
    import copy

    import torch

    from perfcore.experiments.graph import compare_runs
    from perfcore.experiments.graphs import capture_step

    torch.manual_seed(0)
    layers = []
    for _ in range(20):
        layers += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    x, y = torch.randn(8, 64, device="cuda"), torch.randn(8, 64, device="cuda")
    loss_fn = torch.nn.functional.mse_loss
    start = copy.deepcopy(model.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def eager(_b=None):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def timed(fn):
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(steps)]
        for a, b in ev:
            a.record()
            fn((x, y))
            b.record()
        torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) for a, b in ev)

    for _ in range(3):
        eager()
    e_losses = [float(eager()) for _ in range(5)]
    eager_ms = timed(eager)
    model.load_state_dict(start)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    step = capture_step(model, loss_fn, opt, (x, y), warmup=3)
    g_losses = [float(step((x, y)).clone()) for _ in range(5)]
    graph_ms = timed(step)
    chk = compare_runs(e_losses, g_losses, [], [])
    return {"eager_ms": eager_ms, "graph_ms": graph_ms, "speedup": eager_ms / graph_ms, "match": chk["match"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", dest="json_path", default=None)
    args = ap.parse_args()

    import perfcore
    from perfcore.capture import calibration as cal

    caps = perfcore.capabilities()
    if not caps["features"]["cuda_events"]:
        why = caps["reasons"].get("cuda_events") or caps["reasons"].get("native", "unknown")
        print(f"gpu_check: no GPU to check here: {why}", file=sys.stderr)
        return 3

    import torch

    dev = torch.cuda.get_device_name(0)
    t_start = time.time()
    rows: list[tuple[str, str, str, bool]] = []

    def row(name: str, value: str, target: str, ok: bool) -> None:
        rows.append((name, value, target, ok))
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {value} (target {target})", flush=True)

    print(f"gpu_check on {dev}, torch {torch.__version__}, CUPTI {caps['cupti_version']}", flush=True)
    for r in cal.event_timer_error():
        us = r["requested_ns"] / 1e3
        row(f"event timer, {us:g} us kernel", f"{r['median_ns'] / 1e3:.2f} us, error {r['rel_error'] * 100:.2f}%",
            "<= 2%", r["rel_error"] <= 0.02)
    k = cal.cupti_kernel_error()
    for r in k["durations"]:
        us = r["requested_ns"] / 1e3
        row(f"CUPTI kernel duration, {us:g} us kernel", f"{r['median_ns'] / 1e3:.2f} us, error {r['rel_error'] * 100:.2f}% "
            f"({r['kernels']} kernels)", "<= 1%", r["rel_error"] <= 0.01)
    row("CUPTI records on the perfcore clock", f"{k['on_clock']}/{k['launches']} kernels inside their host window",
        "all", k["on_clock"] == k["launches"] and k["launches"] > 0)
    row("CUPTI dropped records", str(k["stats"].get("dropped_records")), "0", k["stats"].get("dropped_records") == 0)
    m = cal.memcpy_kinds()
    row("memcpy pageable/pinned flags", ", ".join(m["src_kinds"]) or "no copies seen", "pageable, pinned", m["correct"])
    bw = cal.copy_bandwidth()
    for key, gbps in bw.items():
        row(f"copy {key.replace('_gbps', '')}", f"{gbps:.1f} GB/s", "measured", gbps > 0)
    lo = cal.launch_overhead_us()
    row("launch overhead", f"{lo['host_us_per_launch']:.2f} us host/launch, {lo['gpu_us_per_kernel']:.2f} us GPU/kernel",
        "measured", lo["host_us_per_launch"] > 0)

    ph = step_timer_costs()
    row("StepTimer CUDA-path phase cost", f"{ph['cuda_phase_ns']:.0f} ns per enter+exit (CPU path {ph['cpu_phase_ns']:.0f} ns)",
        "measured", ph["cuda_phase_ns"] > 0)
    row("StepTimer whole-loop overhead, small-kernel model",
        f"{ph['loop_overhead'] * 100:.2f}% ({ph['plain_ms']:.3f} vs {ph['timed_ms']:.3f} ms/step)", "< 1%",
        ph["loop_overhead"] < 0.01)

    from perfcore.experiments.transfer import nominal_link_gbps

    link = nominal_link_gbps()
    if link.get("gbps"):
        frac = bw["h2d_pinned_gbps"] / link["gbps"]
        row("pinned H2D vs nominal link", f"{bw['h2d_pinned_gbps']:.1f} of {link['gbps']:.1f} GB/s "
            f"(PCIe gen{link['generation']} x{link['width']}) = {frac * 100:.0f}%", ">= 80%", frac >= 0.8)
    else:
        row("pinned H2D vs nominal link", f"link rate unknown: {link.get('reason')}", ">= 80%", False)
    g = graph_check()
    row("CUDA Graph vs eager, launch-bound MLP", f"eager {g['eager_ms']:.3f} ms, graphed {g['graph_ms']:.3f} ms "
        f"({g['speedup']:.2f}x), losses equal: {g['match']}", "graphed faster, equal losses",
        g["speedup"] > 1 and g["match"])

    print()
    print("| check | measured | target | result |")
    print("|---|---|---|---|")
    for name, value, target, ok in rows:
        print(f"| {name} | {value} | {target} | {'PASS' if ok else 'FAIL'} |")
    print(f"\n{dev}; {platform.node()}; {time.strftime('%Y-%m-%d')}; {time.time() - t_start:.0f} s")
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump({"device": dev, "capabilities": caps,
                       "rows": [dict(zip(("check", "measured", "target", "pass"), r)) for r in rows]}, fh, indent=2)
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a check that crashes still ends in one line, never a bare traceback
        from perfcore.errors import DeviceUnavailable

        print(f"gpu_check: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(3 if isinstance(e, DeviceUnavailable) else 1)
