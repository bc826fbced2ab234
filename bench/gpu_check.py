"""One prepared run for a lent GPU machine: every claim about perfcore's GPU parts, as a table.

    bash bench/gpu_check.sh --rows $OUT/rows.jsonl --json $OUT/gpu.json --keep-failed $OUT
    python bench/gpu_check.py [--json PATH] [--rows PATH.jsonl] [--budget-s S] [--only NAME ...] [--resume]
    python bench/gpu_check.py --dry-run   # no GPU: imports, plan, and every check that runs on the CPU

Every row states the value that passes and the claim it decides, so one run decides each claim. The
exit status: 0 when every deciding row passes, 1 when one fails, 2 when none failed but a deciding
row was skipped (the budget ran out: the run has not passed), 3 when there is no GPU (one line).
Rows whose truth depends on the machine rather than on perfcore (a VM's PCIe link, a second GPU) are
INFO or SKIP, with the reason, and decide nothing. Each check runs in its own process under a time
limit: a crash or a hang is that check's FAIL row; the others still run. The checks run in order of
value under a global --budget-s (default 480, the build included); each row is appended to --rows
(JSONL) as its check ends, so a run cut short keeps what it reached, and to a state file on the
device that `--resume` (the rerun command gpu_check.sh prints first) reads to finish the run in a
second call on the warm machine. --keep-failed DIR tars the run folders of failing product rows.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gpu_rows, gpu_reference beside this file
import gpu_device_rows as dev_rows  # noqa: E402
import gpu_judge as J  # noqa: E402
import gpu_reference as ref  # noqa: E402
import gpu_runner as runner  # noqa: E402
import gpu_truth as truth  # noqa: E402
from gpu_rows import Row, within  # noqa: E402


# ---- the checks: each returns rows -------------------------------------------------------------
def check_event_timer() -> list[Row]:
    import gpu_calibration as cal

    return [
        Row(
            f"event timer, {r['requested_ns'] / 1e3:g} us spin kernel",
            f"{r['median_ns'] / 1e3:.2f} us = spin + empty-kernel bracket {r['bracket_ns'] / 1e3:.2f} us "
            f"{r['error_ns'] / 1e3:+.2f} us (IQR {r['spread_ns'] / 1e3:.2f} us)",
            f"error within {r['tolerance_ns'] / 1e3:.2f} us = max(1%, 2 x {cal.EVENT_RESOLUTION_NS / 1e3} us + "
            "IQR) (claim: an event pair times the GPU between its events: kernel and launch gap)",
            bool(r["ok"]),
        )
        for r in cal.event_timer_error()
    ]


def check_cupti_durations() -> list[Row]:
    import gpu_calibration as cal

    k = cal.cupti_kernel_error()
    rows = [
        Row(
            f"CUPTI kernel time, {r['requested_ns'] / 1e3:g} us spin kernel",
            f"{r['median_ns'] / 1e3:.2f} us over {r['kernels']} kernels",
            f"within {r['tolerance_ns'] / 1e3:.2f} us = max(1%, 2 x resolution + IQR)",
            bool(r["ok"]),
        )
        for r in k["durations"]
    ]
    rows.append(
        Row(
            "CUPTI records on the perfcore clock",
            f"{k['on_clock']}/{k['launches']} inside their host window",
            "all",
            k["on_clock"] == k["launches"] > 0,
        )
    )
    return rows


_BACKENDS: dict[str, dict] = {}


def _spins(backend: str) -> dict:
    import gpu_calibration as cal

    if backend not in _BACKENDS:
        _BACKENDS[backend] = cal.spin_kernels(backend)
    return _BACKENDS[backend]


def check_kernel_vs_events() -> list[Row]:
    n = _spins("native")
    return [
        Row(
            f"CUPTI kernel time vs CUDA events, {r['requested_ns'] / 1e6:g} ms",
            f"{r['median_ns'] / 1e3:.1f} vs {r['event_median_ns'] / 1e3:.1f} us",
            "within 1%",
            within(r["median_ns"], r["event_median_ns"], 0.01),
        )
        for r in n["durations"]
    ]


def check_backends_agree() -> list[Row]:
    n = _spins("native")
    try:
        p = _spins("cupti-python")
    except Exception as e:
        return [Row("cupti-python backend vs native", f"could not run: {e}", "same count, time within 1%", False)]
    rows = []
    for a, b in zip(n["durations"], p["durations"]):
        rows.append(
            Row(
                f"backends agree, {a['requested_ns'] / 1e6:g} ms spin kernels",
                f"native {a['kernels']} kernels {a['median_ns'] / 1e3:.1f} us, cupti-python {b['kernels']} "
                f"kernels {b['median_ns'] / 1e3:.1f} us",
                "same count, time within 1%",
                a["kernels"] == b["kernels"] > 0 and within(b["median_ns"], a["median_ns"], 0.01),
            )
        )
    ratio = p["decode_ns_per_record"] / n["decode_ns_per_record"] if n["decode_ns_per_record"] else float("nan")
    rows.append(
        Row(
            "drain cost per record",
            f"native {n['decode_ns_per_record']:.0f} ns, cupti-python "
            f"{p['decode_ns_per_record']:.0f} ns ({ratio:.1f}x)",
            "information (side by side)",
            True,
            decides=False,
        )
    )
    return rows


def check_phase_tagging() -> list[Row]:
    import gpu_calibration as cal

    t = cal.phase_tagging()
    worst = min(t["per_phase"].values())
    return [
        Row(
            "kernels attributed to their phase (external correlation)",
            f"worst phase {worst * 100:.2f}%",
            ">= 99% of each phase's kernels",
            worst >= 0.99,
        ),
        Row(
            "kernels launched outside every phase",
            f"{t['outside_untagged'] * 100:.2f}% left untagged",
            ">= 99% untagged",
            t["outside_untagged"] >= 0.99,
        ),
        Row(
            "backward kernels from autograd's thread",
            f"{t['autograd_kernels']} kernels, {t['autograd_attributed'] * 100:.2f}% attributed to the backward phase",
            "> 0 kernels, >= 99% attributed",
            t["autograd_kernels"] > 0 and t["autograd_attributed"] >= 0.99,
        ),
    ]


def check_graph() -> list[Row]:
    import gpu_calibration as cal

    g = cal.graph_kernels()
    return [
        Row(
            "graph launch: kernels seen",
            f"{g['seen']} of {g['expected']} ({g['launch_ids']} launch ids)",
            "all",
            g["seen"] == g["expected"],
        ),
        Row(
            "graph launch: kernels attributed to the phase",
            f"{g['attributed'] * 100:.2f}%",
            ">= 99% in the phase that launched their replay",
            g["attributed"] >= 0.99,
        ),
    ]


def check_drops() -> list[Row]:
    import gpu_calibration as cal

    m = cal.many_kernels()
    return [
        Row(
            "100k kernels through an 8 MiB pool",
            f"{m['seen']} seen, {m['dropped']} dropped, "
            f"{m['buffers_denied']} buffer refusals, {m['buffers']} buffers, flush {m['flush_ms']:.1f} ms, "
            f"decode {m['decode_ms']:.1f} ms",
            "all seen, 0 dropped",
            m["seen"] == m["launched"] and m["dropped"] == 0,
        )
    ]


def check_threads_and_clock() -> list[Row]:
    import gpu_calibration as cal

    e = cal.events_from_threads()
    d = cal.event_clock_drift()
    # Anchors are re-taken every second: the drift found at a re-sync is the drift over one anchor
    # interval, measured between two anchors each placed within +-uncertainty on the host clock.
    interval_s = d["seconds"] / max(d["syncs"] - 1, 1)
    budget_ns = 20e3 * interval_s + 2 * d["uncertainty_ns"]
    return [
        Row(
            "event phases from 4 threads while resolving",
            f"{e['resolved']}/{e['expected']} pairs, errors "
            f"{e['errors'] or 'none'}, each phase on one thread: {e['one_thread_per_phase']}",
            "all pairs, no errors",
            e["resolved"] == e["expected"] and not e["errors"] and e["one_thread_per_phase"],
        ),
        Row(
            "event clock drift per anchor interval",
            f"{d['max_abs_drift_ns'] / 1e3:.2f} us over anchor intervals "
            f"of {interval_s:.2f} s ({d['syncs']} anchors, each +-{d['uncertainty_ns'] / 1e3:.1f} us)",
            f"<= {budget_ns / 1e3:.1f} us = 20 ppm x interval + 2 x anchor uncertainty (claim: a placed event is "
            "off by at most 20 us per second since its anchor)",
            d["syncs"] >= 2 and abs(d["max_abs_drift_ns"]) <= budget_ns,
        ),
    ]


def check_copies() -> list[Row]:
    import gpu_calibration as cal
    from perfcore.experiments.transfer import nominal_link_gbps

    m = cal.memcpy_kinds()
    rows = [
        Row(
            "memcpy pageable/pinned flags",
            ", ".join(m["src_kinds"]) or "no copies seen",
            "pageable, pinned",
            m["correct"],
        )
    ]
    bw = cal.copy_bandwidth()
    rows += [
        Row(f"copy {k.replace('_gbps', '')}", f"{v:.1f} GB/s", "information (the machine's link)", True, decides=False)
        for k, v in bw.items()
    ]
    rows.append(
        Row(
            "pinned H2D faster than pageable H2D",
            f"{bw['h2d_pinned_gbps']:.1f} vs {bw['h2d_pageable_gbps']:.1f} GB/s",
            "pinned > pageable",
            bw["h2d_pinned_gbps"] > bw["h2d_pageable_gbps"],
        )
        if "h2d_pageable_gbps" in bw
        else Row("pinned vs pageable H2D", f"not measured: {sorted(bw)}", "both measured", False)
    )
    link = nominal_link_gbps()
    # NVML's PCIe link inside a VM is whatever the hypervisor shows: it says nothing about perfcore.
    if link.get("gbps"):
        frac = bw["h2d_pinned_gbps"] / link["gbps"]
        rows.append(
            Row(
                "pinned H2D vs nominal link (environment)",
                f"{bw['h2d_pinned_gbps']:.1f} of "
                f"{link['gbps']:.1f} GB/s (PCIe gen{link['generation']} x{link['width']}) = {frac * 100:.0f}%",
                "information: NVML's link in a VM is the hypervisor's",
                True,
                decides=False,
            )
        )
    else:
        rows.append(
            Row(
                "pinned H2D vs nominal link (environment)",
                f"link rate unknown: {link.get('reason')}",
                "information",
                False,
                decides=False,
            )
        )
    return rows


def check_memory() -> list[Row]:
    import gpu_calibration as cal

    p = cal.peak_memory_kept()
    return [
        Row(
            "script's max_memory_allocated() with per-step peaks taken",
            f"{p['user_peak']} B (without perfcore: {p['truth']} B); step peaks {p['step_peaks']}",
            "equal",
            p["user_peak"] == p["truth"],
        )
    ]


def check_costs() -> list[Row]:
    import gpu_calibration as cal

    lo = cal.launch_overhead_us()
    ph = phase_costs()
    return [
        Row(
            "launch overhead",
            f"{lo['host_us_per_launch']:.2f} us host/launch, {lo['gpu_us_per_kernel']:.2f} us GPU/kernel",
            "information (the machine's driver)",
            True,
            decides=False,
        ),
        Row(
            "StepTimer phase enter+exit",
            f"CUDA events path {ph['cuda_phase_ns']:.0f} ns, CPU path {ph['cpu_phase_ns']:.0f} ns",
            "information (what a step pays is the 5 ms step row)",
            True,
            decides=False,
        ),
    ]


def check_graph_speed() -> list[Row]:
    g = graph_check()
    return [
        Row(
            "CUDA Graph vs eager, launch-bound MLP",
            f"eager {g['eager_ms']:.3f} ms, graphed {g['graph_ms']:.3f} ms "
            f"({g['speedup']:.2f}x), losses equal: {g['match']}",
            "graphed faster, equal losses",
            g["speedup"] > 1 and g["match"],
        )
    ]


def _profiler_kernels(n: int) -> int:
    """GPU kernel events one torch.profiler run records for n relu launches."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(256, 256, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            x = torch.relu(x)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def side_stream_work(spin_ns: int = 2_000_000, steps: int = 12) -> dict:
    """A compute phase whose GPU work runs on a torch side stream (cudaStreamNonBlocking, as a
    prefetcher's), timed by events and by CUPTI: the share of the spin each backend attributes
    to compute. Events on another stream than the work's would read ~0 (host); the work counted on
    two streams would read ~2x. bracket_ms: what an event pair adds around one kernel."""
    import torch

    import perfcore
    from perfcore._native import require_cuda

    import gpu_calibration as cal

    C = require_cuda("side stream check")
    side = torch.cuda.Stream()
    out: dict[str, Any] = {"spin_ms": spin_ns / 1e6, "bracket_ms": cal.event_bracket_ns()["bracket_ns"] / 1e6}
    for kernels in (False, True):
        t = perfcore.StepTimer(device="cuda", warmup=2, kernels=kernels)
        for _ in range(steps):
            with torch.cuda.stream(side):
                with t.compute():
                    C.launch_spin(int(spin_ns), side.cuda_stream)
            torch.cuda.current_stream().wait_stream(side)
            # the loop waits for its work inside the step (loss.item()): without it the host runs
            # 12 steps ahead in ~0.3 ms and the steps hold no GPU time to attribute at all
            torch.cuda.current_stream().synchronize()
            t.step()
        torch.cuda.synchronize()
        df = t.summary()
        t.close()
        key = "cupti" if kernels else "events"
        meas = df[~df["warmup"]]
        out[f"{key}_compute_ms"] = float(meas["compute_ms"].median())
        out[f"{key}_backend"] = t.backend
        out[f"{key}_notes"] = list(t.notes)
    return out


def named_device_events(spin_ns: int = 1_000_000) -> dict:
    """StepTimer(device="cuda:1") while the current device is 0: the events must live on GPU 1
    (the timer's device), and time work launched there."""
    import torch

    import perfcore
    from perfcore._native import require_cuda

    C = require_cuda("cuda:N check")
    n = torch.cuda.device_count()
    if n < 2:
        return {"gpus": n}
    torch.cuda.set_device(0)
    t = perfcore.StepTimer(device="cuda:1", warmup=0)
    with torch.cuda.device(1):
        s1 = torch.cuda.current_stream(1).cuda_stream
    for _ in range(4):
        with t.compute():
            with torch.cuda.device(1):
                C.launch_spin(int(spin_ns), s1)
        t.step()
    df = t.summary()
    return {
        "gpus": n,
        "timer_device": int(t.engine.event_timer.device),
        "compute_ms": float(df["compute_ms"].median()),
        "spin_ms": spin_ns / 1e6,
    }


def torch_profiler_coexistence(n: int = 50) -> dict:
    """torch.profiler, then perfcore with kernels=True, then torch.profiler again, in one process:
    both profiler runs must see the GPU kernels, and perfcore must either trace or say why not
    with advice that is true (restart), never leave the profiler without GPU tracing."""
    import torch

    import perfcore

    before = _profiler_kernels(n)
    t = perfcore.StepTimer(device="cuda", warmup=0, kernels=True)
    x = torch.randn(256, 256, device="cuda")
    for _ in range(4):
        with t.compute():
            x = torch.relu(x)
        t.step()
    t.summary()
    t.close()
    after = _profiler_kernels(n)
    return {
        "expected": n,
        "before": before,
        "after": after,
        "perfcore_backend": t.backend,
        "perfcore_notes": list(t.notes),
    }


def torch_profiler_mid_run(n: int = 50, spin_ns: int = 1_000_000) -> dict:
    """perfcore traces with kernels=True (CUPTI first in this process), then the script starts
    torch.profiler mid-run: perfcore must hand CUPTI over (kineto subscribes on its first use and
    keeps it), the profiler must record the GPU kernels, perfcore must keep timing the GPU with
    events and say from which step, and a profiler run after perfcore closed must work too. Every
    step does the same work (a 1 ms spin kernel and 20 small ones), so compute per step before the
    hand-over (CUPTI) and after it (events) must agree."""
    import torch

    import perfcore
    from perfcore._native import require_cuda

    C = require_cuda("hand-over check")
    s = torch.cuda.current_stream().cuda_stream
    t = perfcore.StepTimer(device="cuda", warmup=0, kernels=True)
    x = torch.randn(256, 256, device="cuda")
    traced_first = t.backend

    def steps(k: int) -> None:
        nonlocal x
        for _ in range(k):
            with t.compute():
                C.launch_spin(int(spin_ns), s)
                for _ in range(20):
                    x = torch.relu(x)
            torch.cuda.synchronize()
            t.step()

    steps(4)
    during = _profiler_kernels(n)  # starts torch.profiler while perfcore holds CUPTI
    steps(4)
    doc = t.result().to_dict()  # run.json's document
    df = t.summary()
    t.close()
    after = _profiler_kernels(n)
    handed = doc.get("capture", {}).get("handed_over") or {}
    comp = df["compute_ms"].to_numpy()
    return {
        "expected": n,
        "traced_first": traced_first,
        "during": during,
        "after": after,
        "handed": handed,
        "compute_before_ms": float(statistics.median(comp[1:4])) if len(comp) >= 4 else 0.0,
        "compute_after_ms": float(statistics.median(comp[4:])) if len(comp) > 4 else 0.0,
    }


def torch_loop_drain(steps: int = 300) -> dict:
    """A torch-heavy training loop (many small ops, optimizer, the constant cudaGetDevice and
    cuCtxGetCurrent calls) under kernels=True: drops, API records per GPU record, and the drain
    cost (flush + decode) against the loop's wall time."""
    import torch

    import perfcore
    from perfcore._native import native

    model = torch.nn.Sequential(
        *[m for _ in range(12) for m in (torch.nn.Linear(128, 128), torch.nn.GELU(), torch.nn.LayerNorm(128))]
    ).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(32, 128, device="cuda")
    # The quiet-API check needs the API records, which only the full mode keeps (lean traces no API).
    t = perfcore.StepTimer(device="cuda", warmup=5, kernels="full")
    t0 = time.perf_counter_ns()
    for _ in range(steps):
        with t.compute():
            train_step(model, opt, x)
        t.step()
    torch.cuda.synchronize()
    wall = time.perf_counter_ns() - t0
    doc = t.result().to_dict()  # run.json's document
    t.close()
    cap = doc["capture"]
    st = t.engine.tracer.stats if t.engine.tracer is not None else {}
    gpu_records = int(st.get("records", 0))
    return {
        "backend": t.backend,
        "steps": steps,
        "records": gpu_records,
        "dropped": int(cap.get("dropped", 0)) + int(cap.get("overflow", 0)),
        "api_calls_filtered": int(cap.get("api_calls_filtered", 0)),
        "quiet_ids": sum(len(v) for v in native()._cupti_quiet_api().values()),
        "drain_ns": int(st.get("decode_ns", 0)) + int(st.get("flush_ns", 0)),
        "wall_ns": wall,
    }


def in_flight_at_stop(kernels: int = 40, spin_ns: int = 5_000_000) -> dict:
    """Spin kernels still queued and running when the tracer stops (no synchronize first): all
    must be delivered, none lost to incomplete records."""
    from perfcore._native import require_cupti

    C = require_cupti("in-flight-at-stop check")
    import torch

    from perfcore.capture.native_cupti import CuptiTracer

    s = torch.cuda.current_stream().cuda_stream
    C.launch_empty(10, s)
    torch.cuda.synchronize()
    tr = CuptiTracer().start()
    for _ in range(kernels):
        C.launch_spin(int(spin_ns), s)
    frames = tr.stop()  # ~200 ms of work still queued here
    k = frames["kernels"]
    st = tr.stats
    return {
        "launched": kernels,
        "seen": int(k["name"].astype(str).str.contains("spinKernel").sum()),
        "synced": bool(tr.synced_at_stop),
        "incomplete": int(st.get("buffers_incomplete", 0)),
        "zero_timestamps": int(st.get("zero_timestamps", 0)),
    }


# ---- the rows for GPU capture on the device's own terms ---------------------------------------
def check_side_stream() -> list[Row]:
    r = side_stream_work()
    want, bracket = r["spin_ms"], r["bracket_ms"]
    rows = []
    for key in ("events", "cupti"):
        got = r[f"{key}_compute_ms"]
        rows.append(
            Row(
                f"compute on a side stream ({key}, backend {r[f'{key}_backend']})",
                f"{got:.3f} ms of a {want:.1f} ms spin per step (event bracket {bracket * 1e3:.2f} us)"
                + (f"; notes: {' | '.join(r[f'{key}_notes'])}" if r[f"{key}_notes"] else ""),
                ">= 90% of the spin and <= (spin + bracket) + 10% (claim: events follow the work's stream; CUPTI "
                "sees every stream; neither counts it twice)",
                J.side_stream_ok(got, want, bracket),
            )
        )
    return rows


def check_named_device() -> list[Row]:
    r = named_device_events()
    if r["gpus"] < 2:
        return [
            Row(
                "StepTimer(device='cuda:1') times GPU 1",
                f"{r['gpus']} GPU(s) here",
                "needs 2 GPUs: skipped",
                False,
                decides=False,
            )
        ]
    return [
        Row(
            "StepTimer(device='cuda:1') times GPU 1",
            f"events on GPU {r['timer_device']}, compute {r['compute_ms']:.3f} ms of a {r['spin_ms']:.1f} ms spin",
            "GPU 1, >= 90% of the spin",
            r["timer_device"] == 1 and r["compute_ms"] >= 0.9 * r["spin_ms"],
        )
    ]


def check_in_flight_at_stop() -> list[Row]:
    r = in_flight_at_stop()
    return [
        Row(
            "kernels still running at stop",
            f"{r['seen']}/{r['launched']} delivered (synchronized first: "
            f"{r['synced']}; incomplete buffers {r['incomplete']}, zero timestamps {r['zero_timestamps']})",
            "all delivered, 0 incomplete",
            r["seen"] == r["launched"] and r["incomplete"] == 0,
        )
    ]


def check_torch_profiler() -> list[Row]:
    r = torch_profiler_coexistence()
    traced = r["perfcore_backend"] != "events"
    told = any("restart" in n for n in r["perfcore_notes"])
    return [
        Row(
            "torch.profiler before perfcore",
            f"{r['before']} GPU kernel events for {r['expected']} launches",
            f">= {r['expected']}",
            r["before"] >= r["expected"],
        ),
        Row(
            "perfcore kernels=True after torch.profiler",
            f"backend {r['perfcore_backend']}; notes: {' | '.join(r['perfcore_notes']) or 'none'}",
            "traced, or events with 'restart' advice",
            traced or told,
        ),
        Row(
            "torch.profiler after perfcore",
            f"{r['after']} GPU kernel events for {r['expected']} launches",
            f">= {r['expected']}",
            r["after"] >= r["expected"],
        ),
    ]


def check_torch_profiler_mid_run() -> list[Row]:
    r = torch_profiler_mid_run()
    h = r["handed"]
    return [
        Row(
            "torch.profiler started while perfcore traces",
            f"{r['during']} GPU kernel events for {r['expected']} launches (perfcore traced with {r['traced_first']})",
            f">= {r['expected']}",
            r["during"] >= r["expected"],
        ),
        Row(
            "perfcore after handing CUPTI over",
            f"handed over: {h.get('note', 'no')}; finalized "
            f"{h.get('finalized')}; compute {r['compute_before_ms']:.3f} ms/step before it (CUPTI), "
            f"{r['compute_after_ms']:.3f} after it (events), same work",
            f"note at step 4, compute after within {100 * J.HANDOVER_REL:g}% of before (claim: timing goes on "
            "unchanged after the hand-over)",
            h.get("at_step") == 4 and J.handover_ok(r["compute_before_ms"], r["compute_after_ms"]),
        ),
        Row(
            "torch.profiler after perfcore stops (CUPTI handed over)",
            f"{r['after']} GPU kernel events for {r['expected']} launches",
            f">= {r['expected']}",
            r["after"] >= r["expected"],
        ),
    ]


def check_graph_before_cupti() -> list[Row]:
    import gpu_calibration as cal

    r = cal.graph_kernels(nodes=30, replays=10, sessions=2)
    rows = []
    for i, sess in enumerate(r["sessions"], 1):
        how = "placed by launch order (version guard)" if sess["by_order"] else "by correlation id"
        rows.append(
            Row(
                f"graph captured before CUPTI's first use, session {i}",
                f"{sess['seen']} of {r['expected']} kernels ({sess['launch_ids']} correlation ids for "
                f"{r['replays']} replays), {sess['attributed'] * 100:.2f}% in the launching phase, {how}",
                "all seen, >= 99% in the phase that launched their replay, the GPU 5 ms behind (claim: graph "
                "kernels go to the launching phase, by launch order where CUPTI's ids are wrong)",
                sess["seen"] == r["expected"] and sess["attributed"] >= 0.99,
            )
        )
    return rows


def check_torch_loop_drain() -> list[Row]:
    r = torch_loop_drain()
    frac = r["drain_ns"] / r["wall_ns"] if r["wall_ns"] else float("nan")
    return [
        Row(
            "torch-heavy loop under kernels=True: records lost",
            f"{r['dropped']} of {r['records']} ({r['steps']} steps, backend {r['backend']})",
            "0",
            r["dropped"] == 0 and r["records"] > 0,
        ),
        Row(
            "noisy runtime/driver API records turned off",
            f"{r['api_calls_filtered']} of {r['quiet_ids']} callback ids accepted by CUPTI",
            "every id of the quiet lists",
            r["api_calls_filtered"] == r["quiet_ids"] > 0,
        ),
        Row(
            "drain cost (flush + decode) vs loop wall",
            f"{frac * 100:.2f}% ({r['drain_ns'] / 1e6:.1f} of {r['wall_ns'] / 1e6:.0f} ms)",
            "information (on the drain thread; the loop's cost is the torch.profiler row's)",
            True,
            decides=False,
        ),
    ]


# In order of value: the rows that decide what a GPU user reads (perfcore run on scripts with a known
# truth, tracing's cost), then the rows still awaiting a device and the new capture rows, then what
# three device runs passed, so a run cut short by its budget has decided those first. Each entry: the
# check, the seconds it is expected to take (its process included; the H200 runs' times rounded up,
# estimates for the checks not run there yet), its time limit, and whether it runs on the CPU too (the
# dry run runs those here: the truth scripts fall back to the CPU).
ORDER: tuple[tuple[str, Callable[[], list[Row]], float, float, bool], ...] = (
    ("truth_launch", truth.truth_launch, 60, 240, True),
    ("truth_compute", truth.truth_compute, 45, 200, True),
    ("truth_transfer", truth.truth_transfer, 45, 200, True),
    ("truth_input", truth.truth_input, 30, 150, True),
    ("truth_cnn", truth.truth_cnn, 30, 150, True),
    ("torch_compare", ref.torch_compare, 20, 90, False),
    ("many_kernels_step", ref.many_kernels_per_step, 40, 120, False),
    ("many_kernels_run", truth.many_kernels_run, 45, 240, True),
    ("graph_before_cupti", check_graph_before_cupti, 5, 45, False),
    ("side_stream", check_side_stream, 7, 45, False),
    ("torch_profiler_mid_run", check_torch_profiler_mid_run, 9, 90, False),
    ("step_overhead", ref.step_overhead, 10, 60, False),
    ("event_starts", dev_rows.check_event_starts, 8, 60, False),
    ("copies_vs_events", dev_rows.check_copies_vs_events, 10, 60, False),
    ("cli_transfer_graph", truth.cli_transfer_graph, 25, 150, True),
    ("long_capture", dev_rows.check_long_capture, 8, 60, False),
    ("event_timer", check_event_timer, 7, 45, False),
    ("run_graphed", ref.run_graphed, 16, 100, False),
    ("demo_quick", ref.demo_quick, 22, 160, False),
    ("threads_clock", check_threads_and_clock, 8, 60, False),
    ("costs", check_costs, 6, 60, False),
    ("torch_loop_drain", check_torch_loop_drain, 12, 90, False),
    ("backends", check_backends_agree, 7, 45, False),
    ("tagging", check_phase_tagging, 6, 45, False),
    ("graph", check_graph, 5, 45, False),
    ("drops", check_drops, 6, 90, False),
    ("in_flight_at_stop", check_in_flight_at_stop, 5, 45, False),
    ("torch_profiler", check_torch_profiler, 9, 90, False),
    ("kernel_vs_events", check_kernel_vs_events, 5, 45, False),
    ("cupti_durations", check_cupti_durations, 5, 45, False),
    ("copies", check_copies, 7, 45, False),
    ("memory", check_memory, 5, 45, False),
    ("graph_speed", check_graph_speed, 9, 45, False),
    ("named_device", check_named_device, 4, 45, False),
)
CHECKS: dict[str, Callable[[], list[Row]]] = {name: fn for name, fn, *_ in ORDER}
TIMES = {name: (exp, lim) for name, _, exp, lim, _ in ORDER}  # expected seconds, time limit
ON_CPU = tuple(name for name, *_, cpu in ORDER if cpu)
BUDGET_S = 480  # the device gives 600 s a command; the build and the margin come out of the rest
BUILD_S = 45  # gpu_check.sh up to the first check (install, one arch; the wheel): 40 s on the H200
# A lease is 15 minutes of device time: a start (1-2 min), the first call, then what is left for the
# rerun command's second call on the warm machine, which skips the build.
SECOND_CALL_S = 240
# Where a call keeps its rows on the device for the next call on the same warm machine (--resume).
STATE = os.environ.get("GPU_CHECK_STATE") or "/tmp/gpu_check_state/rows.jsonl"

_RUN = ("perfcore.cli:main", "gpu_judge:share_gaps")
# What each check imports (module, or module:attribute): --dry-run imports them all, so a
# renamed function fails here, not on a lent GPU.
USES: dict[str, tuple[str, ...]] = {
    "truth_launch": (*_RUN, "gpu_judge:reported_points", "gpu_judge:tracing_ok", "torch.profiler:profile"),
    "truth_compute": (*_RUN, "gpu_judge:util_ok", "pandas:read_csv"),
    "truth_transfer": (*_RUN, "gpu_judge:pin_advice"),
    "truth_input": _RUN,
    "truth_cnn": _RUN,
    "many_kernels_run": _RUN,
    "cli_transfer_graph": ("perfcore.cli:main", "perfcore.experiments.graph_experiment:graph_experiment"),
    "event_starts": ("gpu_calibration:event_starts_vs_cupti", "gpu_calibration:event_bracket_ns"),
    "copies_vs_events": ("gpu_calibration:copies_vs_events", "perfcore.experiments.transfer:measure"),
    "long_capture": ("gpu_calibration:long_graph_capture", "perfcore.capture.native_cupti:CuptiTracer"),
    "event_timer": ("gpu_calibration:event_timer_error",),
    "cupti_durations": ("gpu_calibration:cupti_kernel_error",),
    "kernel_vs_events": ("gpu_calibration:spin_kernels", "perfcore.capture.native_cupti:CuptiTracer"),
    "backends": ("gpu_calibration:spin_kernels", "perfcore.capture.cupti_python:CuptiPythonTracer", "cupti"),
    "tagging": ("gpu_calibration:phase_tagging", "perfcore.capture.launches:LaunchPhases"),
    "graph": ("gpu_calibration:graph_kernels",),
    "drops": ("gpu_calibration:many_kernels",),
    "threads_clock": ("gpu_calibration:events_from_threads", "gpu_calibration:event_clock_drift"),
    "copies": (
        "gpu_calibration:memcpy_kinds",
        "gpu_calibration:copy_bandwidth",
        "perfcore.experiments.transfer:nominal_link_gbps",
    ),
    "memory": ("gpu_calibration:peak_memory_kept",),
    "costs": ("gpu_calibration:launch_overhead_us", "perfcore:StepTimer"),
    "graph_speed": (
        "perfcore.experiments.graph_experiment:check_same_training",
        "perfcore.experiments.graph_capture:capture_step",
    ),
    "side_stream": ("perfcore:StepTimer", "gpu_calibration:event_bracket_ns", "gpu_judge:side_stream_ok"),
    "named_device": ("perfcore:StepTimer",),
    "in_flight_at_stop": ("perfcore.capture.native_cupti:CuptiTracer",),
    "torch_profiler": ("perfcore:StepTimer", "torch.profiler:profile", "perfcore.capture.native_cupti:kineto_state"),
    "graph_before_cupti": ("gpu_calibration:graph_kernels",),
    "torch_loop_drain": ("perfcore:StepTimer", "perfcore._native:native"),
    "torch_profiler_mid_run": (
        "perfcore:StepTimer",
        "torch.profiler:profile",
        "perfcore.capture.native_cupti:before_torch_profiler",
        "gpu_judge:handover_ok",
    ),
    "run_graphed": ("perfcore.cli:main",),
    "torch_compare": ("perfcore:StepTimer", "torch.profiler:profile", "gpu_judge:tracing_ok"),
    "step_overhead": ("perfcore:StepTimer", "perfcore._native:require_cuda", "gpu_judge:reported_overhead_ok"),
    "many_kernels_step": ("perfcore:StepTimer", "perfcore._native:require_cupti"),
    "demo_quick": ("perfcore.cli:main",),
}

_SHARES = "each within 3 points of the truth's band"
_VERDICT = "names the truth's bottleneck"


def _truth_plan(what: str) -> tuple[tuple[str, str], ...]:
    return tuple(
        (f"{what} ({how}): {row}", target)
        for how in ("default", "--no-kernels")
        for row, target in (("shares vs the script's truth", _SHARES), ("verdict", _VERDICT))
    )


# The rows each check gives and the value that passes each, for --dry-run (the check's own code
# states the same target when it runs; test_gpu_check holds the two together).
PLAN: dict[str, tuple[tuple[str, str], ...]] = {
    "truth_launch": _truth_plan("launch-bound")
    + (
        ("launch-bound (default): reported overhead vs measured", "within 2 points each way"),
        ("launch-bound (--no-kernels): reported overhead vs measured", "within 2 points each way"),
        ("launch-bound: a traced perfcore run's cost", "<= 3%"),
        ("launch-bound: traced perfcore run vs torch.profiler", "torch.profiler >= 3x perfcore's cost"),
    ),
    "truth_compute": _truth_plan("compute-bound")
    + (
        ("compute-bound: GPU utilisation vs CUPTI's busy share", "within 0.15"),
        ("health's busy share vs CUPTI's busy share (compute-bound)", "from gpu_util, within 0.15"),
    ),
    "truth_transfer": _truth_plan("transfer-bound")
    + (("transfer-bound: pinning advised, pinned speedup in its band", "pin_memory advised, speedup in its band"),),
    "truth_input": _truth_plan("input-bound"),
    "truth_cnn": _truth_plan("cnn") + (("cnn (default): records lost", "0"),),
    "many_kernels_run": (("3200 kernels a step under perfcore run", "0 lost, >= 3200 launches a step counted"),),
    "cli_transfer_graph": (
        ("perfcore transfer --sizes 64M", "exit 0, pinned faster both ways"),
        ("perfcore graph (a launch-bound MLP)", "exit 0, graphed faster, same training"),
    ),
    "event_starts": (
        ("event-placed kernel start vs CUPTI's, same kernels", "within [-2 x anchor unc., bracket + 2 x anchor unc.]"),
        ("event-placed kernel end vs CUPTI's, same kernels", "within [-2 x anchor unc., bracket + 2 x anchor unc.]"),
    ),
    "copies_vs_events": (
        ("copy bandwidth h2d/d2h x pinned/pageable vs torch.cuda.Event-timed copy_ (4 rows)", "within 10%"),
    ),
    "long_capture": (
        (
            "graph capture of > 200 ms under kernels=True, 20 ms drain",
            "captured, replays right, all kernels traced, >= 1 flush during it",
        ),
    ),
    "event_timer": (
        (
            "event timer, spin kernels of 50 us / 1 ms / 10 ms",
            "spin + empty-kernel bracket within max(1%, 2 x resolution + IQR)",
        ),
    ),
    "cupti_durations": (
        ("CUPTI kernel time, 3 spin lengths", "within max(1%, 2 x resolution + IQR)"),
        ("CUPTI records on the perfcore clock", "all"),
    ),
    "kernel_vs_events": (("CUPTI kernel time vs CUDA events", "within 1%"),),
    "backends": (("backends agree", "same count, time within 1%"), ("drain cost per record", "information")),
    "tagging": (
        ("kernels attributed to their phase", ">= 99% of each phase's kernels"),
        ("kernels launched outside every phase", ">= 99% untagged"),
        ("backward kernels from autograd's thread", "> 0 kernels, >= 99% attributed"),
    ),
    "graph": (
        ("graph launch: kernels seen", "all"),
        ("graph launch: kernels attributed to the phase", ">= 99% in the phase that launched their replay"),
    ),
    "drops": (("100k kernels through an 8 MiB pool", "all seen, 0 dropped"),),
    "threads_clock": (
        ("event phases from 4 threads while resolving", "all pairs, no errors"),
        ("event clock drift per anchor interval", "<= 20 ppm x interval + 2 x anchor uncertainty"),
    ),
    "copies": (
        ("memcpy pageable/pinned flags", "pageable, pinned"),
        ("copy bandwidths", "information"),
        ("pinned H2D faster than pageable H2D", "pinned > pageable"),
        ("pinned H2D vs nominal link (environment)", "information"),
    ),
    "memory": (("script's max_memory_allocated() with per-step peaks taken", "equal"),),
    "costs": (("launch overhead", "information"), ("StepTimer phase enter+exit", "information")),
    "graph_speed": (("CUDA Graph vs eager, launch-bound MLP", "graphed faster, equal losses"),),
    "side_stream": (
        ("compute on a side stream (events)", ">= 90% of the spin, <= spin + bracket + 10%"),
        ("compute on a side stream (cupti)", ">= 90% of the spin, <= spin + bracket + 10%"),
    ),
    "named_device": (("StepTimer(device='cuda:1') times GPU 1", "GPU 1, >= 90% of the spin (SKIP with 1 GPU)"),),
    "in_flight_at_stop": (("kernels still running at stop", "all delivered, 0 incomplete"),),
    "torch_profiler": (
        ("torch.profiler before perfcore", ">= launches"),
        ("perfcore kernels=True after torch.profiler", "traced, or events with 'restart' advice"),
        ("torch.profiler after perfcore", ">= launches"),
    ),
    "graph_before_cupti": (
        ("graph captured before CUPTI's first use, session 1", "all seen, >= 99% in the launching phase"),
        ("graph captured before CUPTI's first use, session 2", "all seen, >= 99% in the launching phase (by order)"),
    ),
    "torch_loop_drain": (
        ("torch-heavy loop under kernels=True: records lost", "0"),
        ("noisy runtime/driver API records turned off", "every id of the quiet lists"),
        ("drain cost (flush + decode) vs loop wall", "information"),
    ),
    "torch_profiler_mid_run": (
        ("torch.profiler started while perfcore traces", ">= launches"),
        ("perfcore after handing CUPTI over", "note at step 4, compute after within 20% of before"),
        ("torch.profiler after perfcore stops (CUPTI handed over)", ">= launches"),
    ),
    "run_graphed": (("make_graphed_callables under perfcore run", "exit 0, the script's line, steps > 0, no error"),),
    "torch_compare": (
        ("kernels vs torch.profiler, same eager AdamW loop", "within 2%"),
        ("kernel GPU time vs torch.profiler", "within 2% (kineto's kernel events, not its GPU annotations)"),
        ("tracing cost per step vs torch.profiler", "torch.profiler >= 3x perfcore's"),
    ),
    "step_overhead": (
        ("StepTimer cost on a 5 ms step (events, 4 phases)", "< 1% of the step"),
        ("overhead run.json reports vs measured", "within +-(2 x spread + 1 us)"),
    ),
    "many_kernels_step": (("3200 kernels a step for 1100 steps, kernels=True", "all kept, 0 lost"),),
    "demo_quick": (
        ("perfcore demo --quick", "exit 0 with demo.json"),
        ("demo's health reads the GPU's busy share", "information"),
    ),
}


# Packages the device run installs from the carried .whl/ folder (it has no network): a wheel
# there must fit the device's Python, whatever is installed here.
CARRIED = {"cupti": "cupti_python-"}
DEVICE_PYTHON = "3.12"  # the lent H200's (torch 2.11+cu130)


def wheel_fits(filename: str, python: str) -> bool:
    """Whether a wheel's tags (name-version[-build]-python-abi-platform.whl) install on CPython
    `python` ("3.12") on x86-64 Linux."""
    parts = filename[: -len(".whl")].split("-") if filename.endswith(".whl") else []
    if len(parts) < 5:
        return False
    py_tags, abi_tags, plats = (set(p.split(".")) for p in parts[-3:])
    major, minor = (int(x) for x in python.split(".")[:2])
    cp = f"cp{major}{minor}"
    plat_ok = any(p == "any" or (p.startswith(("manylinux", "linux")) and p.endswith("x86_64")) for p in plats)
    if not plat_ok:
        return False
    if cp in py_tags or f"py{major}" in py_tags or f"py{major}{minor}" in py_tags:
        return bool(abi_tags & {cp, "none", "abi3"})
    # abi3: built for an older CPython 3, usable on every newer one
    older = [t for t in py_tags if t.startswith(f"cp{major}") and t[2:].isdigit() and int(t[3:] or 0) <= minor]
    return "abi3" in abi_tags and bool(older)


def carried_misses(wheels: Path, python: str) -> list[str]:
    """What to carry is missing: one line per package with no wheel in `wheels` that fits `python`."""
    out = []
    for mod, prefix in CARRIED.items():
        found = sorted(p.name for p in wheels.glob(prefix + "*.whl"))
        if not any(wheel_fits(f, python) for f in found):
            have = ", ".join(found) or "none"
            out.append(
                f"{mod}: no wheel in {wheels}/ for Python {python} (there: {have}); run "
                f"DEVICE_PYTHON={python} bash bench/fetch_wheels.sh where there is a network"
            )
    return out


def plan_lines(budget_s: float) -> tuple[list[str], float]:
    """The order the checks run in, each one's expected seconds and the running total (the
    build first), and that total."""
    lines = ["| # | check | expected s | total s | rows (passes when) |", "|---|---|---|---|---|"]
    total = BUILD_S
    lines.append(f"| 0 | build (gpu_check.sh) | {BUILD_S} | {total} | |")
    for i, (name, _, exp, *_) in enumerate(ORDER, 1):
        total += exp
        rows = "; ".join(f"{row} ({target})" for row, target in PLAN.get(name, ()))
        lines.append(f"| {i} | {name} | {exp:g} | {total:g} | {rows} |")
    over = f"; past it, the rerun command finishes the rest on the warm machine" if total > budget_s else ""
    lines.append(f"expected {total:g} s, the budget of one call {budget_s:g} s{over}")
    return lines, total


def dry_run(
    say: Callable[[str], None] = print,
    wheels: Path | None = None,
    budget_s: float = BUDGET_S,
    python: str = DEVICE_PYTHON,
    run: Iterable[str] = (),
) -> int:
    """No GPU needed: import what every check uses, check the carried wheels fit the device's
    Python, and print the order, each check's expected time and rows with the value that passes;
    then run the checks named in `run` here (the truth scripts fall back to the CPU), each in its own
    process as on the device, and print their rows. 0 when all of that holds, 1 (naming each miss)
    otherwise: a check here that crashes, hangs or gives no rows is a miss; a row that FAILs on the
    CPU is not (no GPU utilisation, no kernels to trace)."""
    wheels = wheels or Path(__file__).resolve().parents[1] / ".whl"
    missing = [f"to carry to the device: {m}" for m in carried_misses(wheels, python)]
    for name in CHECKS:
        for use in USES.get(name, ()):
            mod, _, attr = use.partition(":")
            if mod in CARRIED:
                continue  # installed on the device from its wheel (checked above)
            try:
                m = importlib.import_module(mod)
                if attr and not hasattr(m, attr):
                    missing.append(f"{name}: {mod} has no {attr}")
            except Exception as e:
                missing.append(f"{name}: import {mod}: {type(e).__name__}: {e}")
    for name in CHECKS:
        if name not in USES or name not in PLAN:
            missing.append(f"{name}: not listed in USES and PLAN")
    lines, total = plan_lines(budget_s)
    if total > budget_s + SECOND_CALL_S:
        missing.append(
            f"the checks are expected to take {total:g} s, over the {budget_s:g} s budget and the second call's "
            f"{SECOND_CALL_S} s together"
        )
    say("\n".join(lines))
    names = list(run)
    if names:
        t0 = time.time()
        say(f"running {len(names)} checks on the CPU: {', '.join(names)}")
        rows = runner.run_isolated(names, _child, TIMES, say=say)
        broken = [r for r in rows if r.target == "runs" or r.measured in ("no result",)]
        missing += [f"{r.check}: {r.measured}" for r in broken]
        say(f"CPU rows: {runner.counts(rows)} in {time.time() - t0:.0f} s")
    for m in missing:
        say(f"gpu_check --dry-run: {m}")
    return 1 if missing else 0


def _child(name: str, limit: float) -> list[Row]:
    return runner.in_child(os.path.abspath(__file__), name, limit)


def header(budget_s: float, caps: dict, device: str) -> dict:
    """What a run's rows were measured on: the first line of its rows and its summary's header."""
    import torch

    root = Path(__file__).resolve().parents[1]
    commit = os.environ.get("GPU_CHECK_COMMIT") or _git(root, "rev-parse", "--short", "HEAD") or "unknown"
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit + ("+changes" if dirty else ""),
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cupti_version": caps.get("cupti_version"),
        "python": platform.python_version(),
        "driver": _driver(),
        "host": platform.node(),
        "budget_s": budget_s,
    }


def _git(root: Path, *args: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # no NVML binding or driver: the header says none
        return None


def train_step(model, opt, x) -> None:
    """One small training step (forward, backward, optimizer) of the loops timed here."""
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def phase_costs(n: int = 20000) -> dict:
    """One phase's enter+exit on the CUDA-events path and on the CPU path."""
    import perfcore

    out = {}
    for key, device in (("cuda_phase_ns", "cuda"), ("cpu_phase_ns", "cpu")):
        timer = perfcore.StepTimer(device=device)
        t0 = time.perf_counter_ns()
        for _ in range(n):
            with timer.compute():
                pass
        out[key] = (time.perf_counter_ns() - t0) / n
        timer.summary()
        timer.close()
    return out


def graph_check(steps: int = 50) -> dict:
    """A launch-bound model (20 small layers, batch 8): eager vs captured step, and equal losses."""
    import copy

    import torch

    from perfcore.experiments.graph_experiment import check_same_training
    from perfcore.experiments.graph_capture import capture_step

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
    chk = check_same_training(e_losses, g_losses, [], [])
    return {"eager_ms": eager_ms, "graph_ms": graph_ms, "speedup": eager_ms / graph_ms, "match": chk["match"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", dest="json_path", default=None, help="the run's summary: header, counts, rows")
    ap.add_argument(
        "--rows",
        dest="rows_path",
        default=None,
        help="append each row to this JSONL file as its check ends (e.g. $OUT/rows.jsonl); its first line "
        "is the run's header (date, commit, device, stack)",
    )
    ap.add_argument(
        "--budget-s",
        type=float,
        default=BUDGET_S,
        help=f"seconds for the whole run, counted from gpu_check.sh's start (default {BUDGET_S}): "
        "checks run in order of value, and one that would not fit is skipped (exit 2)",
    )
    ap.add_argument("--only", nargs="+", choices=sorted(CHECKS), help="run these checks only")
    ap.add_argument(
        "--resume",
        action="store_true",
        help=f"skip the checks a previous call on this machine recorded in {STATE} (GPU_CHECK_STATE), "
        "and report their rows with the new ones",
    )
    ap.add_argument("--keep-failed", default=None, help=f"add the run folders of failing rows to DIR/{runner.TAR_NAME}")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: the order and expected times, the imports each check uses, the carried wheels, "
        "and every check that can run on the CPU, run here",
    )
    ap.add_argument("--plan-only", action="store_true", help="with --dry-run: run no check")
    ap.add_argument("--device-python", default=DEVICE_PYTHON, help="the device's Python, for the carried wheels")
    ap.add_argument("--one", choices=sorted(CHECKS), help=argparse.SUPPRESS)  # a child of run_isolated
    ap.add_argument("--rows-to", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.dry_run:
        on_cpu = () if args.plan_only else [n for n in ON_CPU if not args.only or n in args.only]
        return dry_run(budget_s=args.budget_s, python=args.device_python, run=on_cpu)
    if args.one:
        rows = runner.run_checks({args.one: CHECKS[args.one]}, say=lambda s: None)
        with open(args.rows_to, "w") as fh:
            json.dump([asdict(r) for r in rows], fh)
        return 0

    # the budget counts from gpu_check.sh's start (the build is in it), else from now
    t0 = float(os.environ.get("GPU_CHECK_T0") or time.time())
    import perfcore

    caps = perfcore.capabilities()
    if not caps["features"]["cuda_events"]:
        why = caps["reasons"].get("cuda_events") or caps["reasons"].get("native", "unknown")
        print(f"gpu_check: no GPU to check here: {why}", file=sys.stderr)
        return 3

    import torch

    dev = torch.cuda.get_device_name(0)
    head = header(args.budget_s, caps, dev)
    print(
        f"gpu_check on {dev}, torch {torch.__version__}, CUPTI {caps.get('cupti_version')}, Python "
        f"{platform.python_version()}, commit {head['commit']}; budget {args.budget_s:.0f} s, "
        f"{time.time() - t0:.0f} s used",
        flush=True,
    )
    done, earlier = runner.done_checks(STATE) if args.resume else (set(), [])
    if not args.resume and os.path.exists(STATE):
        os.remove(STATE)  # a first call starts the state afresh; only --resume reads it
    os.makedirs(os.path.dirname(STATE), exist_ok=True)
    runner.append_lines(args.rows_path, [json.dumps({"header": dict(head, resumed=sorted(done))})])
    if done:
        print(f"resuming: {len(done)} checks done by the previous call ({', '.join(sorted(done))})", flush=True)
    names = [k for k in CHECKS if (not args.only or k in args.only) and k not in done]
    rows = earlier + runner.run_isolated(
        names,
        _child,
        TIMES,
        say=lambda s: print(s, flush=True),
        budget_s=args.budget_s,
        t0=t0,
        rows_paths=(args.rows_path, STATE),
        keep_failed=args.keep_failed,
    )
    print()
    print(runner.table(rows))
    code = runner.exit_code(rows)
    print(f"\n{dev}; {platform.node()}; {head['date']}; {time.time() - t0:.0f} s; {runner.counts(rows)}; exit {code}")
    if args.json_path:
        with open(args.json_path, "w") as fh:
            summary = {"header": head, "counts": runner.counts(rows), "exit": code, "capabilities": caps}
            json.dump(dict(summary, rows=[asdict(r) for r in rows]), fh, indent=2)
    return code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a failure outside the checks still ends in one line, never a bare traceback
        from perfcore.errors import DeviceUnavailable

        print(f"gpu_check: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(3 if isinstance(e, DeviceUnavailable) else 1)
