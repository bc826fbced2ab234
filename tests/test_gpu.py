"""GPU invariants and tolerances (never absolute times). Skipped, with the reason, without a GPU."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.cuda]


def test_event_timer_matches_known_kernels():
    from perfcore.calibration import event_timer_error

    for r in event_timer_error((1_000_000, 10_000_000), repeats=10):
        assert r["rel_error"] <= 0.02, r


def test_cupti_kernel_durations_and_clock():
    from perfcore.calibration import cupti_kernel_error

    res = cupti_kernel_error((1_000_000,), repeats=10)
    assert res["durations"][0]["kernels"] == 10
    assert res["durations"][0]["rel_error"] <= 0.01
    assert res["on_clock"] == res["launches"]
    assert res["stats"]["dropped_records"] == 0


def test_memcpy_pageable_vs_pinned_flags():
    from perfcore.calibration import memcpy_kinds

    assert memcpy_kinds(4 << 20)["correct"]


def test_pinned_copies_are_not_slower_than_pageable():
    from perfcore.calibration import copy_bandwidth

    bw = copy_bandwidth(64 << 20, repeats=5)
    assert bw["h2d_pinned_gbps"] >= 0.9 * bw["h2d_pageable_gbps"]


def test_event_timer_resolves_without_waiting_when_work_is_pending():
    import torch

    from perfcore._native import native

    C = native()
    s = torch.cuda.current_stream().cuda_stream
    t = C.EventTimer()
    t.begin(0, 0, s)
    C.launch_spin(200_000_000, s)  # 200 ms
    t.end(0, s)
    assert len(t.resolve(wait=False)["gpu_ns"]) == 0  # a query, not a sync
    assert t.pending == 1
    assert len(t.resolve(wait=True)["gpu_ns"]) == 1


def test_step_timer_cuda_path_matches_known_kernels():
    import time

    import torch

    import perfcore
    from perfcore._native import native

    C = native()
    timer = perfcore.StepTimer(device="cuda", warmup=2)
    s = torch.cuda.current_stream().cuda_stream
    for _ in range(12):
        with timer.transfer():
            C.launch_spin(2_000_000, s)  # 2 ms "copy"
        with timer.compute():
            C.launch_spin(10_000_000, s)  # 10 ms kernel
        # Steps end on the host; sync so each step's GPU work lies inside its own wall interval.
        torch.cuda.synchronize()
        time.sleep(0.001)
        timer.step()
    df = timer.summary()
    steady = df[~df["warmup"]]
    assert len(steady) == 10
    assert abs(steady["compute_ms"].median() / 10.0 - 1) < 0.03
    assert abs(steady["transfer_ms"].median() / 2.0 - 1) < 0.03
    assert (steady["host_ms"] >= 0.9).all()  # the 1 ms sleep, GPU idle


def test_step_timer_kernels_mode_uses_cupti():
    import torch

    import perfcore

    with perfcore.StepTimer(device="cuda", warmup=1, kernels=True) as timer:
        x = torch.randn(2048, 2048, device="cuda")
        for _ in range(5):
            with timer.compute():
                x @ x
            timer.step()
        torch.cuda.synchronize()
        res = timer.result()
    assert res["backend"] == "native-cupti"
    assert res["kernels"] and res["kernels"][0]["count"] >= 4
    assert res["breakdown_fraction"]["compute"] > 0
