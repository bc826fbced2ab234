"""One prepared run for a lent GPU machine: every claim about perfcore's GPU parts, as a table.

    bash bench/gpu_check.sh            # builds perfcore there (local arch only), then runs this
    python bench/gpu_check.py [--json PATH] [--only NAME ...]

Every row states the value that passes, so one run decides each claim with no judgement needed;
the exit status is 0 when every row passes, 1 when any fails, 3 when there is no GPU (one line).
A check that crashes becomes a FAIL row with its error; the others still run. Under 4 minutes on
an H200 (each check is sized for that; the build is not counted).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable, Iterable


@dataclass
class Row:
    check: str
    measured: str
    target: str  # the value that passes, in words
    ok: bool


def within(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * abs(b)


# ---- the checks: each returns rows -------------------------------------------------------------
def check_event_timer() -> list[Row]:
    from perfcore.capture import calibration as cal

    return [Row(f"event timer, {r['requested_ns'] / 1e3:g} us spin kernel",
                f"{r['median_ns'] / 1e3:.2f} us (IQR {r['spread_ns'] / 1e3:.2f} us)",
                f"within {r['tolerance_ns'] / 1e3:.2f} us = max(1%, 2 x {cal.EVENT_RESOLUTION_NS / 1e3} us + IQR)",
                bool(r["ok"])) for r in cal.event_timer_error()]


def check_cupti_durations() -> list[Row]:
    from perfcore.capture import calibration as cal

    k = cal.cupti_kernel_error()
    rows = [Row(f"CUPTI kernel time, {r['requested_ns'] / 1e3:g} us spin kernel",
                f"{r['median_ns'] / 1e3:.2f} us over {r['kernels']} kernels",
                f"within {r['tolerance_ns'] / 1e3:.2f} us = max(1%, 2 x resolution + IQR)", bool(r["ok"]))
            for r in k["durations"]]
    rows.append(Row("CUPTI records on the perfcore clock", f"{k['on_clock']}/{k['launches']} inside their host window",
                    "all", k["on_clock"] == k["launches"] > 0))
    return rows


_BACKENDS: dict[str, dict] = {}


def _spins(backend: str) -> dict:
    from perfcore.capture import calibration as cal

    if backend not in _BACKENDS:
        _BACKENDS[backend] = cal.spin_kernels(backend)
    return _BACKENDS[backend]


def check_kernel_vs_events() -> list[Row]:
    n = _spins("native")
    return [Row(f"CUPTI kernel time vs CUDA events, {r['requested_ns'] / 1e6:g} ms",
                f"{r['median_ns'] / 1e3:.1f} vs {r['event_median_ns'] / 1e3:.1f} us",
                "within 1%", within(r["median_ns"], r["event_median_ns"], 0.01)) for r in n["durations"]]


def check_backends_agree() -> list[Row]:
    n = _spins("native")
    try:
        p = _spins("cupti-python")
    except Exception as e:
        return [Row("cupti-python backend vs native", f"could not run: {e}", "same count, time within 1%", False)]
    rows = []
    for a, b in zip(n["durations"], p["durations"]):
        rows.append(Row(f"backends agree, {a['requested_ns'] / 1e6:g} ms spin kernels",
                        f"native {a['kernels']} kernels {a['median_ns'] / 1e3:.1f} us, cupti-python {b['kernels']} "
                        f"kernels {b['median_ns'] / 1e3:.1f} us", "same count, time within 1%",
                        a["kernels"] == b["kernels"] > 0 and within(b["median_ns"], a["median_ns"], 0.01)))
    ratio = p["decode_ns_per_record"] / n["decode_ns_per_record"] if n["decode_ns_per_record"] else float("nan")
    rows.append(Row("drain cost per record", f"native {n['decode_ns_per_record']:.0f} ns, cupti-python "
                    f"{p['decode_ns_per_record']:.0f} ns ({ratio:.0f}x)", "measured (both > 0)",
                    n["decode_ns_per_record"] > 0 and p["decode_ns_per_record"] > 0))
    return rows


def check_phase_tagging() -> list[Row]:
    from perfcore.capture import calibration as cal

    t = cal.phase_tagging()
    worst = min(t["per_phase"].values())
    return [Row("kernels attributed to their phase (external correlation)", f"worst phase {worst * 100:.2f}%",
                ">= 99% of each phase's kernels", worst >= 0.99),
            Row("kernels launched outside every phase", f"{t['outside_untagged'] * 100:.2f}% left untagged",
                ">= 99% untagged", t["outside_untagged"] >= 0.99),
            Row("backward kernels from autograd's thread", f"{t['autograd_kernels']} kernels, "
                f"{t['autograd_attributed'] * 100:.2f}% attributed to the backward phase",
                "> 0 kernels, >= 99% attributed", t["autograd_kernels"] > 0 and t["autograd_attributed"] >= 0.99)]


def check_graph() -> list[Row]:
    from perfcore.capture import calibration as cal

    g = cal.graph_kernels()
    return [Row("graph launch: kernels seen", f"{g['seen']} of {g['expected']} ({g['launch_ids']} launch ids)",
                "all", g["seen"] == g["expected"]),
            Row("graph launch: kernels attributed to the phase", f"{g['attributed'] * 100:.2f}%", ">= 99%",
                g["attributed"] >= 0.99)]


def check_drops() -> list[Row]:
    from perfcore.capture import calibration as cal

    m = cal.many_kernels()
    return [Row("100k kernels through an 8 MiB pool", f"{m['seen']} seen, {m['dropped']} dropped, "
                f"{m['buffers_denied']} buffer refusals, {m['buffers']} buffers, flush {m['flush_ms']:.1f} ms, "
                f"decode {m['decode_ms']:.1f} ms", "all seen, 0 dropped",
                m["seen"] == m["launched"] and m["dropped"] == 0)]


def check_threads_and_clock() -> list[Row]:
    from perfcore.capture import calibration as cal

    e = cal.events_from_threads()
    d = cal.event_clock_drift()
    per_s = abs(d["max_abs_drift_ns"]) / max(d["seconds"], 1e-9)
    return [Row("event phases from 4 threads while resolving", f"{e['resolved']}/{e['expected']} pairs, errors "
                f"{e['errors'] or 'none'}, each phase on one thread: {e['one_thread_per_phase']}",
                "all pairs, no errors", e["resolved"] == e["expected"] and not e["errors"] and e["one_thread_per_phase"]),
            Row("event clock drift vs host clock", f"{d['max_abs_drift_ns'] / 1e3:.2f} us over {d['seconds']:.1f} s "
                f"({d['syncs']} syncs, +-{d['uncertainty_ns'] / 1e3:.1f} us)", "<= 20 us per second (20 ppm)",
                d["syncs"] >= 2 and per_s <= 20_000)]


def check_copies() -> list[Row]:
    from perfcore.capture import calibration as cal
    from perfcore.experiments.transfer import nominal_link_gbps

    m = cal.memcpy_kinds()
    rows = [Row("memcpy pageable/pinned flags", ", ".join(m["src_kinds"]) or "no copies seen", "pageable, pinned",
                m["correct"])]
    bw = cal.copy_bandwidth()
    rows += [Row(f"copy {k.replace('_gbps', '')}", f"{v:.1f} GB/s", "measured (> 0)", v > 0) for k, v in bw.items()]
    link = nominal_link_gbps()
    if link.get("gbps"):
        frac = bw["h2d_pinned_gbps"] / link["gbps"]
        rows.append(Row("pinned H2D vs nominal link", f"{bw['h2d_pinned_gbps']:.1f} of {link['gbps']:.1f} GB/s "
                        f"(PCIe gen{link['generation']} x{link['width']}) = {frac * 100:.0f}%", ">= 80%", frac >= 0.8))
    else:
        rows.append(Row("pinned H2D vs nominal link", f"link rate unknown: {link.get('reason')}", ">= 80%", False))
    return rows


def check_memory() -> list[Row]:
    from perfcore.capture import calibration as cal

    p = cal.peak_memory_kept()
    return [Row("script's max_memory_allocated() with per-step peaks taken", f"{p['user_peak']} B (without perfcore: "
                f"{p['truth']} B); step peaks {p['step_peaks']}", "equal", p["user_peak"] == p["truth"])]


def check_costs() -> list[Row]:
    from perfcore.capture import calibration as cal

    lo = cal.launch_overhead_us()
    ph = step_timer_costs()
    return [Row("launch overhead", f"{lo['host_us_per_launch']:.2f} us host/launch, {lo['gpu_us_per_kernel']:.2f} us "
                "GPU/kernel", "measured (> 0)", lo["host_us_per_launch"] > 0),
            Row("StepTimer CUDA-path phase cost", f"{ph['cuda_phase_ns']:.0f} ns per enter+exit (CPU path "
                f"{ph['cpu_phase_ns']:.0f} ns)", "measured (> 0)", ph["cuda_phase_ns"] > 0),
            Row("StepTimer whole-loop overhead, small-kernel model", f"{ph['loop_overhead'] * 100:.2f}% "
                f"({ph['plain_ms']:.3f} vs {ph['timed_ms']:.3f} ms/step)", "< 1%", ph["loop_overhead"] < 0.01)]


def check_graph_speed() -> list[Row]:
    g = graph_check()
    return [Row("CUDA Graph vs eager, launch-bound MLP", f"eager {g['eager_ms']:.3f} ms, graphed {g['graph_ms']:.3f} ms "
                f"({g['speedup']:.2f}x), losses equal: {g['match']}", "graphed faster, equal losses",
                g["speedup"] > 1 and g["match"])]


CHECKS: dict[str, Callable[[], list[Row]]] = {
    "event_timer": check_event_timer, "cupti_durations": check_cupti_durations,
    "kernel_vs_events": check_kernel_vs_events, "backends": check_backends_agree, "tagging": check_phase_tagging,
    "graph": check_graph, "drops": check_drops, "threads_clock": check_threads_and_clock, "copies": check_copies,
    "memory": check_memory, "costs": check_costs, "graph_speed": check_graph_speed,
}


# ---- running and reporting (no GPU needed) -----------------------------------------------------
def run_checks(checks: dict[str, Callable[[], list[Row]]], say: Callable[[str], None] = print) -> list[Row]:
    rows: list[Row] = []
    for name, fn in checks.items():
        t0 = time.perf_counter()
        try:
            got = fn()
            if not got:
                got = [Row(name, "no result", "a result", False)]
        except Exception as e:  # one check's crash is its FAIL row; the others still run
            got = [Row(name, f"crashed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", "runs", False)]
        for r in got:
            rows.append(r)
            say(f"  {'PASS' if r.ok else 'FAIL'}  {r.check}: {r.measured} (passes: {r.target})")
        say(f"  ({name}: {time.perf_counter() - t0:.1f} s)")
    return rows


def table(rows: Iterable[Row]) -> str:
    lines = ["| check | measured | passes when | result |", "|---|---|---|---|"]
    lines += [f"| {r.check} | {r.measured} | {r.target} | {'PASS' if r.ok else 'FAIL'} |" for r in rows]
    return "\n".join(lines)


def exit_code(rows: list[Row]) -> int:
    return 0 if rows and all(r.ok for r in rows) else 1


def step_timer_costs(steps: int = 200, repeats: int = 5) -> dict:
    """Phase cost on the CUDA path, and a small-kernel training loop timed vs untimed (interleaved)."""
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", dest="json_path", default=None)
    ap.add_argument("--only", nargs="+", choices=sorted(CHECKS), help="run these checks only")
    args = ap.parse_args(argv)

    import perfcore

    caps = perfcore.capabilities()
    if not caps["features"]["cuda_events"]:
        why = caps["reasons"].get("cuda_events") or caps["reasons"].get("native", "unknown")
        print(f"gpu_check: no GPU to check here: {why}", file=sys.stderr)
        return 3

    import torch

    dev = torch.cuda.get_device_name(0)
    t_start = time.time()
    print(f"gpu_check on {dev}, torch {torch.__version__}, CUPTI {caps.get('cupti_version')}", flush=True)
    checks = {k: v for k, v in CHECKS.items() if not args.only or k in args.only}
    rows = run_checks(checks, say=lambda s: print(s, flush=True))
    print()
    print(table(rows))
    print(f"\n{dev}; {platform.node()}; {time.strftime('%Y-%m-%d')}; {time.time() - t_start:.0f} s")
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump({"device": dev, "capabilities": caps, "rows": [asdict(r) for r in rows]}, fh, indent=2)
    return exit_code(rows)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a failure outside the checks still ends in one line, never a bare traceback
        from perfcore.errors import DeviceUnavailable

        print(f"gpu_check: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(3 if isinstance(e, DeviceUnavailable) else 1)
