"""GPU invariants and tolerances (never absolute times). Skipped, with the reason, without a GPU."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

# the calibration helpers live beside gpu_check in bench/ (they ship in no wheel)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

pytestmark = [pytest.mark.cuda]


def test_event_timer_matches_known_kernels():
    from gpu_calibration import event_timer_error

    # Tolerance: 1%, or two event resolutions plus the measured spread where that is coarser.
    for r in event_timer_error((50_000, 1_000_000, 10_000_000), repeats=10):
        assert r["ok"], r


def test_cupti_kernel_durations_and_clock():
    from gpu_calibration import cupti_kernel_error

    res = cupti_kernel_error((1_000_000,), repeats=10)
    assert res["durations"][0]["kernels"] == 10
    assert res["durations"][0]["ok"], res
    assert res["on_clock"] == res["launches"]
    assert res["stats"]["dropped_records"] == 0


def test_memcpy_pageable_vs_pinned_flags():
    from gpu_calibration import memcpy_kinds

    assert memcpy_kinds(4 << 20)["correct"]


def test_pinned_copies_are_not_slower_than_pageable():
    from gpu_calibration import copy_bandwidth

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
    cap = res["capture"]
    assert cap["dropped"] == 0 and cap["records"] > 0 and cap["kernels_by_external_id"] >= 5


def test_second_kernels_timer_falls_back_instead_of_raising():
    import perfcore

    with perfcore.StepTimer(device="cuda", kernels=True) as first:
        second = perfcore.StepTimer(device="cuda", kernels=True, kernel_backend="native")
        assert first.backend == "native-cupti" and second.backend == "events"
        assert any("already running" in n for n in second.notes)
        second.close()  # must not stop the first timer's tracing
        assert first.engine.tracer.active


def test_kernel_time_matches_cuda_events_within_1_percent():
    from gpu_calibration import spin_kernels

    for r in spin_kernels("native", (1_000_000,), repeats=10)["durations"]:
        assert r["kernels"] == 10 and abs(r["median_ns"] - r["event_median_ns"]) <= 0.01 * r["event_median_ns"], r


def test_phase_kernels_attributed_including_autograd_thread():
    from gpu_calibration import phase_tagging

    t = phase_tagging(launches_per_phase=200, phases=2)
    assert min(t["per_phase"].values()) >= 0.99 and t["outside_untagged"] >= 0.99
    assert t["autograd_kernels"] > 0 and t["autograd_attributed"] >= 0.99, t


def test_every_kernel_of_a_graph_launch_is_seen_and_tagged():
    from gpu_calibration import graph_kernels

    g = graph_kernels(nodes=20, replays=5)
    assert g["seen"] == g["expected"] and g["attributed"] >= 0.99, g


def test_no_drops_with_a_small_pool_drained_continuously():
    from gpu_calibration import many_kernels

    m = many_kernels(n=50_000)
    assert m["seen"] == m["launched"] and m["dropped"] == 0, m


def test_event_phases_from_several_threads():
    from gpu_calibration import events_from_threads

    e = events_from_threads(threads=4, pairs=500)
    assert not e["errors"] and e["resolved"] == e["expected"] and e["one_thread_per_phase"], e


def test_users_peak_memory_survives_per_step_peaks():
    from gpu_calibration import peak_memory_kept

    p = peak_memory_kept()
    assert p["user_peak"] == p["truth"], p


def test_cupti_python_backend_agrees_with_native():
    pytest.importorskip("cupti.cupti", reason="cupti-python is not installed")
    from gpu_calibration import spin_kernels

    a = spin_kernels("native", (1_000_000,), repeats=10)["durations"][0]
    b = spin_kernels("cupti-python", (1_000_000,), repeats=10)["durations"][0]
    assert a["kernels"] == b["kernels"] == 10 and abs(a["median_ns"] - b["median_ns"]) <= 0.01 * a["median_ns"]


def test_diagnose_and_sweep_on_gpu():
    from perfcore.experiments.diagnose import diagnose
    from perfcore.experiments.sweep import sweep
    from perfcore.workloads import load_workload

    w = load_workload("demo")
    doc = diagnose(w, steps=10, warmup=2).to_dict()
    assert doc["device"] == "cuda"
    assert doc["experiments"][0]["busy_mean"] == doc["experiments"][0]["busy_mean"]  # sampled, not NaN
    sw = sweep(w, {"batch_size": [8, 16], "num_workers": [0, 2], "pin_memory": [False, True], "prefetch_factor": [2]},
               steps=5, warmup=1).to_dict()
    assert len(sw["configs"]) == 8 and all(c["peak_mem_bytes"] > 0 for c in sw["configs"] if not c["oom"])


def test_perfcore_run_traces_kernels_of_a_script(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "gpu_train.py"
    script.write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "m = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.01)\n"
        "dl = DataLoader(TensorDataset(torch.randn(2048, 512), torch.randint(0, 10, (2048,))), batch_size=64)\n"
        "for x, y in dl:\n"
        "    x, y = x.cuda(), y.cuda()\n"
        "    loss = torch.nn.functional.cross_entropy(m(x), y)\n"
        "    opt.zero_grad(); loss.backward(); opt.step()\n")
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--warmup", "3", "--out", str(out), "--",
                        sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["backend"] == "native-cupti" and doc["kernels"]
    assert doc["memcpy"]["by_direction"]["h2d"]["pageable_bytes"] > 0  # x.cuda() from pageable memory
    assert doc["findings"][0]["kind"] == "pin_memory"
    assert set(doc["compute_split_gpu_ms"]) == {"forward", "backward", "optimizer"}
    assert Path(out / "kernels.png").is_file()
