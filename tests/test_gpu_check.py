"""bench/gpu_check.py's CPU-checkable parts: it imports, refuses in one line without a GPU, every
row names the value that passes, a crashing check is a FAIL row and the others still run, and
any FAIL makes the exit status non-zero."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # gpu_calibration, gpu_rows, gpu_reference


@pytest.fixture(scope="module")
def gc():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "bench" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod  # dataclasses look their module up while the file runs
    spec.loader.exec_module(mod)
    return mod


def test_shell_script_parses():
    assert subprocess.run(["bash", "-n", str(ROOT / "bench" / "gpu_check.sh")]).returncode == 0


def test_without_a_gpu_exit_3_in_one_line(gc, caps, capsys):
    if caps["features"]["cuda_events"]:
        pytest.skip("a GPU is present")
    assert gc.main([]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpu_check: no GPU") and "\n" not in err


def test_crash_is_a_fail_row_and_the_rest_run(gc):
    def boom():
        raise RuntimeError("CUPTI exploded\nsecond line")

    def fine():
        return [gc.Row("fine", "1", "1", True)]

    said = []
    rows = gc.run_checks({"boom": boom, "fine": fine, "empty": lambda: []}, say=said.append)
    assert [(r.check, r.ok) for r in rows] == [("boom", False), ("fine", True), ("empty", False)]
    assert "CUPTI exploded" in rows[0].measured and "second line" not in rows[0].measured
    assert gc.exit_code(rows) == 1 and gc.exit_code(rows[1:2]) == 0 and gc.exit_code([]) == 1


def test_table_states_the_passing_value_of_every_row(gc):
    rows = [gc.Row("a", "3 us", "within 1%", True), gc.Row("b", "0.5", ">= 99%", False)]
    t = gc.table(rows).splitlines()
    assert t[0] == "| check | measured | passes when | result |"
    assert t[2].endswith("| within 1% | PASS |") and t[3].endswith("| >= 99% | FAIL |")


def test_every_check_is_registered_and_callable(gc):
    assert {"event_timer", "kernel_vs_events", "backends", "tagging", "graph", "drops", "copies"} <= set(gc.CHECKS)
    assert all(callable(f) for f in gc.CHECKS.values())
    assert gc.within(101, 100, 0.01) and not gc.within(102, 100, 0.01)


def test_tolerance_comes_from_resolution_and_spread():
    from gpu_calibration import EVENT_RESOLUTION_NS, duration_tolerance_ns

    # A 50 us kernel: 1% (0.5 us) is finer than two event resolutions, so those set the bound.
    assert duration_tolerance_ns(50_000, 0) == 2 * EVENT_RESOLUTION_NS
    assert duration_tolerance_ns(50_000, 3_000) == 2 * EVENT_RESOLUTION_NS + 3_000  # a busy device's jitter
    assert duration_tolerance_ns(10_000_000, 0) == 100_000  # long kernels: 1%


def _device_wheels(tmp_path: Path) -> Path:
    (tmp_path / "cupti_python-13.0.1-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl").write_text("")
    return tmp_path


def test_dry_run_imports_what_every_check_uses_and_prints_each_row(gc, tmp_path):
    # The table a lent GPU would decide, checked here: every import every check makes resolves
    # (a renamed function fails now, not on the device), every check has rows with targets and an
    # expected time, in the order they run, and the total fits the budget.
    said = []
    assert gc.dry_run(say=said.append, wheels=_device_wheels(tmp_path)) == 0, said
    lines = [ln for ln in "\n".join(said).splitlines() if ln.startswith("| ") and not ln.startswith("| #")]
    named = [ln.split(" | ")[1] for ln in lines][1:]  # after the build's line
    assert named == list(gc.CHECKS)
    assert all(ln.rstrip(" |").split(" | ")[-1].strip() for ln in lines[1:])
    total = float(lines[-1].split(" | ")[3])
    assert total <= gc.BUDGET_S and f"expected {total:g} s of the {gc.BUDGET_S:g} s budget" in said[0]


def test_dry_run_fails_when_the_checks_do_not_fit_the_budget(gc, tmp_path):
    said = []
    assert gc.dry_run(say=said.append, wheels=_device_wheels(tmp_path), budget_s=100) == 1
    assert any("over the 100 s budget" in s for s in said)


def test_the_carried_wheel_must_fit_the_devices_python_not_this_one(gc, tmp_path):
    # The first device run's Python was 3.12; a cp311 wheel (fetched for this machine's Python)
    # passed the old dry run here, where cupti-python is installed, and failed there.
    (tmp_path / "cupti_python-13.0.1-cp311-cp311-manylinux2014_x86_64.whl").write_text("")
    said = []
    assert gc.dry_run(say=said.append, wheels=tmp_path) == 1
    assert any("no wheel" in s and "Python 3.12" in s and "cp311" in s for s in said)
    assert gc.dry_run(say=said.append, wheels=tmp_path, python="3.11") == 0


def test_wheel_tags():
    spec = importlib.util.spec_from_file_location("gpu_check_tags", ROOT / "bench" / "gpu_check.py")
    gc = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check_tags"] = gc
    spec.loader.exec_module(gc)
    fits = gc.wheel_fits
    assert fits("cupti_python-13.0.1-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", "3.12")
    assert not fits("cupti_python-13.0.1-cp311-cp311-manylinux2014_x86_64.whl", "3.12")
    assert not fits("cupti_python-13.0.1-cp312-cp312-manylinux2014_aarch64.whl", "3.12")
    assert not fits("cupti_python-13.0.1-cp312-cp312-win_amd64.whl", "3.12")
    assert fits("x-1.0-py3-none-any.whl", "3.12")
    assert fits("x-1.0-cp39-abi3-manylinux_2_28_x86_64.whl", "3.12")
    assert not fits("x-1.0-cp313-abi3-manylinux_2_28_x86_64.whl", "3.12")


def test_the_budget_skips_what_does_not_fit_and_each_row_is_kept_as_it_ends(gc, tmp_path, monkeypatch):
    # The device gives 600 s a command: the checks run in order of value, one expected to take
    # longer than the budget has left is skipped with a row that says so, and every row is in
    # the JSONL file the moment its check ends (a run killed later keeps them).
    import json
    import time

    seen = []

    def fake_child(name, limit):
        seen.append((name, limit))
        time.sleep(0.3)
        return [gc.Row(name, "1", "1", True)]

    monkeypatch.setattr(gc, "_in_child", fake_child)
    monkeypatch.setattr(gc, "EXPECTED_S", {"a": 0.1, "b": 0.1, "c": 50})
    rows_path = tmp_path / "rows.jsonl"
    said = []
    rows = gc.run_isolated(["a", "c", "b"], say=said.append, limits={"a": 90, "b": 90, "c": 90}, budget_s=2.0,
                           rows_path=str(rows_path))
    assert [(r.check, r.verdict) for r in rows] == [("a", "PASS"), ("c", "SKIP"), ("b", "PASS")]
    assert "not run" in rows[1].measured and [n for n, _ in seen] == ["a", "b"]
    assert all(limit <= 2.0 for _, limit in seen)  # no check may run past the budget's end
    got = [json.loads(ln) for ln in rows_path.read_text().splitlines()]
    assert [(g["check_name"], g["verdict"]) for g in got] == [("a", "PASS"), ("c", "SKIP"), ("b", "PASS")]
    assert got[0]["elapsed_s"] < got[2]["elapsed_s"]


def test_the_drift_row_judges_each_anchor_interval(gc, monkeypatch):
    # A 60 ppm event clock: 60 us of drift at each 1 s re-anchor. Dividing the worst drift by the
    # whole 3 s run read 20 ppm and passed "<= 20 ppm"; per anchor interval it is 60 ppm.
    import gpu_calibration as cal

    monkeypatch.setattr(cal, "events_from_threads", lambda: {"resolved": 1, "expected": 1, "errors": [],
                                                             "one_thread_per_phase": True})
    drift = {"syncs": 4, "max_abs_drift_ns": 60_000, "uncertainty_ns": 2_000, "seconds": 3.0}
    monkeypatch.setattr(cal, "event_clock_drift", lambda: dict(drift))
    row = gc.check_threads_and_clock()[1]
    assert not row.ok and "24.0 us" in row.target
    drift["max_abs_drift_ns"] = 15_000  # 15 ppm: inside 20 ppm plus the two anchors' uncertainty
    assert gc.check_threads_and_clock()[1].ok


def test_dry_run_names_an_import_that_does_not_resolve(gc, monkeypatch, tmp_path):
    monkeypatch.setitem(gc.USES, "graph_speed", ("perfcore.experiments.graph_experiment:compare_runs",))
    said = []
    assert gc.dry_run(say=said.append, wheels=_device_wheels(tmp_path)) == 1
    assert any("graph_speed: perfcore.experiments.graph_experiment has no compare_runs" in s for s in said)


def test_each_defect_has_a_row(gc):
    for name in ("side_stream", "named_device", "in_flight_at_stop", "torch_profiler", "graph_before_cupti",
                 "torch_loop_drain", "torch_profiler_mid_run", "run_graphed", "run_cnn", "torch_compare",
                 "step_overhead", "many_kernels_step", "demo_quick"):
        assert name in gc.CHECKS and gc.PLAN[name]


def test_a_check_past_its_time_limit_is_its_own_fail_row(gc):
    # Each check runs in a child process under a limit: one that does not finish ends its row,
    # and the next check still runs.
    said = []
    rows = gc.run_isolated(["event_timer", "graph"], say=said.append, limits={"event_timer": 0.05, "graph": 0.05})
    assert [(r.check, r.ok) for r in rows] == [("event_timer", False), ("graph", False)]
    assert "no result within" in rows[0].measured


def test_rows_that_the_machine_decides_do_not_decide_the_run(gc):
    rows = [gc.Row("claim", "ok", "x", True), gc.Row("PCIe link in a VM", "?", "information", False, decides=False)]
    assert gc.exit_code(rows) == 0 and rows[1].verdict == "SKIP"
    assert gc.exit_code(rows[1:]) == 1  # nothing decided is not a pass
    assert "| SKIP |" in gc.table(rows)


def test_torch_profiler_total_is_its_kernels_not_its_gpu_annotations():
    # A step as kineto reports it: 4 kernels of 3 us, the spin kernel, a memset, and the GPU
    # projection of the optimizer's record_function range spanning 700 us around its kernels.
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    import gpu_reference

    def ev(i, name, start, end, **kw):
        return FunctionEvent(i, name, thread=0, start_us=start, end_us=end, device_type=DeviceType.CUDA, **kw)

    events = [ev(i, "gemm", 10.0 * i, 10.0 * i + 3.0) for i in range(4)]
    events += [ev(5, "spinKernel", 50.0, 150.0), ev(6, "Memset (Device)", 160.0, 161.0)]
    events += [ev(7, "Optimizer.step#AdamW.step", 0.0, 700.0, is_user_annotation=True)]
    events += [FunctionEvent(8, "aten::mm", thread=0, start_us=0.0, end_us=5.0)]  # a CPU op
    k = gpu_reference.kineto_kernels(events)
    assert (k["n"], k["us"], k["spin_us"]) == (5, 112.0, 100.0)
    assert (k["annotations"], k["annotation_us"]) == (1, 700.0)
    assert k["by_name"] == {"gemm": 4, "spinKernel": 1}
    assert gpu_reference.count_gaps({"gemm": 5, "spinKernel": 1}, k["by_name"]) == "; gemm: 5 vs 4"
    assert gpu_reference.count_gaps({"gemm": 4, "spinKernel": 1}, k["by_name"]) == ""
