"""bench/gpu_check.py's CPU-checkable parts: it imports, refuses in one line without a GPU, every
row names the value that passes, a crashing check is a FAIL row and the others still run, any FAIL
makes the exit status 1 and a deciding row skipped makes it 2; every judge of a deciding row fails
on a value past its bound; the truth scripts run on the CPU and their truth adds up; the dry run runs
the checks that can run here."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # gpu_calibration, gpu_rows, gpu_reference, gpu_judge, gpu_runner

import gpu_judge as J  # noqa: E402
import gpu_runner as runner  # noqa: E402


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
    rows = runner.run_checks({"boom": boom, "fine": fine, "empty": lambda: []}, say=said.append)
    assert [(r.check, r.ok) for r in rows] == [("boom", False), ("fine", True), ("empty", False)]
    assert "CUPTI exploded" in rows[0].measured and "second line" not in rows[0].measured
    assert runner.exit_code(rows) == 1 and runner.exit_code(rows[1:2]) == 0 and runner.exit_code([]) == 1


def test_table_states_the_passing_value_of_every_row(gc):
    rows = [gc.Row("a", "3 us", "within 1%", True), gc.Row("b", "0.5", ">= 99%", False)]
    t = runner.table(rows).splitlines()
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
    # expected time, in the order they run, and the total fits two calls on one lease.
    said = []
    assert gc.dry_run(say=said.append, wheels=_device_wheels(tmp_path)) == 0, said
    lines = [ln for ln in "\n".join(said).splitlines() if ln.startswith("| ") and not ln.startswith("| #")]
    named = [ln.split(" | ")[1] for ln in lines][1:]  # after the build's line
    assert named == list(gc.CHECKS)
    assert all(ln.rstrip(" |").split(" | ")[-1].strip() for ln in lines[1:])
    total = float(lines[-1].split(" | ")[3])
    assert total <= gc.BUDGET_S + gc.SECOND_CALL_S and f"expected {total:g} s, the budget of one call" in said[0]


def test_dry_run_fails_when_the_checks_do_not_fit_two_calls(gc, tmp_path):
    said = []
    assert gc.dry_run(say=said.append, wheels=_device_wheels(tmp_path), budget_s=100) == 1
    assert any("over the 100 s budget and the second call's" in s for s in said)


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


def test_the_budget_skips_what_does_not_fit_and_each_row_is_kept_as_it_ends(tmp_path):
    # The device gives 600 s a command: the checks run in order of value, one expected to take
    # longer than the budget has left is skipped with a row that says so, every row is in the
    # JSONL file the moment its check ends (a run killed later keeps them), and a run cut short
    # does not pass: exit 2.
    import json
    import time

    seen = []

    def fake_child(name, limit):
        seen.append((name, limit))
        time.sleep(0.3)
        return [runner.Row(name, "1", "1", True)]

    rows_path = tmp_path / "rows.jsonl"
    said = []
    times = {"a": (0.1, 90), "b": (0.1, 90), "c": (50, 90)}
    rows = runner.run_isolated(["a", "c", "b"], fake_child, times, say=said.append, budget_s=2.0,
                               rows_paths=[str(rows_path)])
    assert [(r.check, r.verdict) for r in rows] == [("a", "PASS"), ("c", "SKIP"), ("b", "PASS")]
    assert "not run" in rows[1].measured and [n for n, _ in seen] == ["a", "b"]
    assert all(limit <= 2.0 for _, limit in seen)  # no check may run past the budget's end
    got = [json.loads(ln) for ln in rows_path.read_text().splitlines()]
    assert [(g["check_name"], g["verdict"]) for g in got] == [("a", "PASS"), ("c", "SKIP"), ("b", "PASS")]
    assert got[0]["elapsed_s"] < got[2]["elapsed_s"]
    assert runner.exit_code(rows) == 2  # skipped, not passed
    assert runner.exit_code([rows[0], rows[2]]) == 0
    assert runner.exit_code(rows + [runner.Row("d", "x", "y", False)]) == 1  # a failure says more than a skip


def test_a_second_call_resumes_from_the_state_the_first_kept(tmp_path):
    # The first call's rows are kept on the device: a second call on the warm machine runs only
    # what they do not cover (the budget's SKIP rows are not done) and reports the earlier rows.
    import json

    state = tmp_path / "rows.jsonl"
    done = [runner.Row("row a", "1", "1", True), runner.Row("c", "not run", "budget", False, skipped=True)]
    state.write_text(json.dumps({"header": {"date": "x"}}) + "\n"
                     + runner.row_line("a", done[0], 1.0) + "\n" + runner.row_line("c", done[1], 2.0) + "\n"
                     + "not json\n")
    names, rows = runner.done_checks(str(state))
    assert names == {"a"} and [(r.check, r.ok) for r in rows] == [("row a", True)]
    assert runner.done_checks(str(tmp_path / "absent.jsonl")) == (set(), [])


def test_failing_rows_folders_come_back_in_one_small_tar(tmp_path):
    import tarfile

    def folder(name, big=False):
        d = tmp_path / name
        (d / "run").mkdir(parents=True)
        (d / "run" / "run.json").write_text("{}")
        (d / "script.log").write_text("log")
        if big:
            (d / "run" / "trace.json").write_bytes(b"x" * (runner.TAR_FILE_MAX_BYTES + 1))
        return str(d)

    rows = [runner.Row("passes", "1", "1", True, folder=folder("ok")),
            runner.Row("fails", "1", "1", False, folder=folder("bad", big=True)),
            runner.Row("info", "1", "1", False, decides=False, folder=folder("info"))]
    out = tmp_path / "out"
    left = runner.keep_failed_folders("truth_x", rows, out)
    with tarfile.open(out / runner.TAR_NAME) as tar:
        names = sorted(tar.getnames())
    assert names == ["truth_x/bad/run/run.json", "truth_x/bad/script.log"]
    assert len(left) == 1 and "trace.json" in left[0]
    runner.keep_failed_folders("truth_y", rows, out)  # a later check's failures are added to the same tar
    with tarfile.open(out / runner.TAR_NAME) as tar:
        assert len(tar.getnames()) == 4
    assert (out / runner.TAR_NAME).stat().st_size < runner.TAR_MAX_BYTES


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
                 "torch_loop_drain", "torch_profiler_mid_run", "run_graphed", "torch_compare",
                 "step_overhead", "many_kernels_step", "demo_quick", "truth_launch", "truth_compute",
                 "truth_transfer", "truth_input", "truth_cnn", "many_kernels_run", "cli_transfer_graph",
                 "event_starts", "copies_vs_events", "long_capture"):
        assert name in gc.CHECKS and gc.PLAN[name]


def test_a_check_past_its_time_limit_is_its_own_fail_row(gc):
    # Each check runs in a child process under a limit: one that does not finish ends its row,
    # and the next check still runs.
    said = []
    rows = runner.run_isolated(["event_timer", "graph"], gc._child, {"event_timer": (1, 0.05), "graph": (1, 0.05)},
                               say=said.append)
    assert [(r.check, r.ok) for r in rows] == [("event_timer", False), ("graph", False)]
    assert "no result within" in rows[0].measured


def test_rows_that_the_machine_decides_do_not_decide_the_run(gc):
    rows = [gc.Row("claim", "ok", "x", True), gc.Row("PCIe link in a VM", "?", "information", False, decides=False)]
    assert runner.exit_code(rows) == 0 and rows[1].verdict == "SKIP"
    assert runner.exit_code(rows[1:]) == 1  # nothing decided is not a pass
    assert "| SKIP |" in runner.table(rows)


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


# ---- the judges of the deciding rows: each fails on a value past its bound -----------------------
def _truth(step=10.0, **band):
    """A truth of a 10 ms step: exact shares unless a band is given."""
    share = {"load": 0.5, "transfer": 0.1, "compute": 0.3, "comm": 0.0, "host": 0.1}
    b = {lb: band.get(lb, [v, v]) for lb, v in share.items()}
    return {"step_ms": step, "share": share, "band": b, "steps": 20, "compute_how": "paced", "paced_ok": True}


def test_shares_within_three_points_of_the_band_each_way():
    t = _truth()
    exact = {"load": 5.0, "transfer": 1.0, "compute": 3.0, "comm": 0.0, "host": 1.0}
    assert J.shares_ok(J.share_gaps(exact, 0.0, t))
    # perfcore's own time goes back into the script's host time before comparing
    assert J.share_gaps(dict(exact, host=0.6), 0.4, t)["host"] == pytest.approx(0.0)
    for lb, delta, ok in (("load", 0.29, True), ("load", 0.31, False), ("compute", -0.29, True),
                          ("compute", -0.31, False), ("host", 0.31, False), ("transfer", -0.31, False)):
        got = J.share_gaps(dict(exact, **{lb: exact[lb] + delta}), 0.0, t)
        assert J.shares_ok(got) is ok, (lb, delta, got)
        assert got[lb] == pytest.approx(10 * delta if abs(delta) > 0 else 0.0)
    # a band: anywhere inside it is no gap, past its edges by more than 3 points fails
    wide = _truth(compute=[0.1, 0.3], host=[0.1, 0.3])
    assert J.shares_ok(J.share_gaps(dict(exact, compute=1.0, host=3.0), 0.0, wide))
    assert not J.shares_ok(J.share_gaps(dict(exact, compute=0.65, host=3.35), 0.0, wide))


def test_the_verdict_must_name_the_truths_bottleneck():
    t = _truth()
    assert J.bottlenecks(t) == {"load"}
    # two causes closer than the tolerance: either may be named
    close = _truth(load=[0.30, 0.30], host=[0.27, 0.27])
    assert J.bottlenecks(close) == {"load", "host"}
    # nothing surely past the 10% tier: compute (healthy), or the cause that may be past it
    quiet = _truth(load=[0.03, 0.03], transfer=[0.02, 0.02], host=[0.05, 0.05])
    assert J.bottlenecks(quiet) == {"compute"}
    edge = _truth(load=[0.08, 0.08], transfer=[0.0, 0.0], host=[0.02, 0.02])
    assert J.bottlenecks(edge) == {"load", "compute"}
    doc = {"verdict": {"bound": "load", "ranked": [{"label": "host", "level": "warn"}, {"label": "load", "level": "minor"}]}}
    assert J.verdict_label(doc) == "host" and J.verdict_label({"verdict": {"ranked": []}}) == "compute"
    assert J.verdict_label({"verdict": {"ranked": [{"label": "load", "level": "minor"}]}}) == "compute"  # none named


def test_pinning_advice_and_its_band():
    doc = {"verdict": {"ranked": [{"label": "transfer", "level": "critical", "gain": {"band": [1.5, 2.5]}}]},
           "findings": [{"kind": "pin_memory", "gain": None}]}
    named, band, where = J.pin_advice(doc)
    assert named and band == (1.5, 2.5) and "transfer cause" in where
    doc["findings"][0]["gain"] = {"band": [1.2, 1.4]}
    assert J.pin_advice(doc)[1] == (1.2, 1.4)
    assert J.in_band(1.3, (1.2, 1.4)) and not J.in_band(1.41, (1.2, 1.4)) and not J.in_band(1.19, (1.2, 1.4))
    assert not J.in_band(1.3, None)
    assert J.pin_advice({"verdict": {}, "findings": [{"kind": "more_workers"}]})[0] is False


def test_reported_overhead_against_measured_each_way_and_missing_figures_fail():
    doc = {"overhead": {"ms_per_step": 0.05, "tracing_ms_per_step": 0.10, "own_ms_per_step": 0.01}}
    assert J.reported_points(doc, 5.0) == pytest.approx(3.0)
    # where the overhead figure counts tracing already, it is not added twice
    counted = {"overhead": dict(doc["overhead"], ms_per_step=0.15, counted=["phases", "kernel_tracing"])}
    assert J.reported_points(counted, 5.0) == pytest.approx(3.0)
    assert J.overhead_points(5.15, 5.0) == pytest.approx(3.0)
    assert J.overhead_ok(3.0, 1.01, 0.5) and not J.overhead_ok(3.0, 0.99, 0.5) and not J.overhead_ok(3.0, 5.01, 0.5)
    assert not J.overhead_ok(3.0, 3.0, 1.01)  # bare runs too far apart to decide
    assert J.own_ms_back(doc) == pytest.approx(0.11)
    with pytest.raises(J.Missing, match="overhead.tracing_ms_per_step"):
        J.reported_points({"overhead": {"ms_per_step": 0.05}}, 5.0)
    with pytest.raises(J.Missing, match="capture.tracing"):
        J.need({"capture": {"tracing": None}}, "capture.tracing")


def test_tracing_cheap_and_three_times_cheaper_than_torch_profiler():
    assert J.tracing_ok(2.9, 9.0, 0.5) == (True, True)
    assert J.tracing_ok(3.1, 9.3, 0.5) == (False, True)
    assert J.tracing_ok(2.0, 5.9, 0.5) == (True, False)  # cheap, but not 3x cheaper than the profiler
    assert J.tracing_ok(-0.5, 4.0, 0.5) == (True, True)  # a traced run within noise of the bare one
    assert J.tracing_ok(-1.5, 4.0, 0.5) == (False, False)  # faster than bare by more than noise: a noisy run
    assert J.tracing_ok(2.0, 9.0, 1.5) == (False, False)  # bare runs too far apart to decide
    assert J.tracing_ok(0.0, 0.0, 0.5)[1] is False  # a profiler that cost nothing decides nothing


def test_util_handover_side_stream_overhead_and_starts_bounds():
    assert J.util_ok(0.80, 0.94) and not J.util_ok(0.78, 0.94) and not J.util_ok(0.94, 0.78)
    assert J.handover_ok(1.0, 1.19) and J.handover_ok(1.0, 0.81) and not J.handover_ok(1.0, 1.21)
    assert not J.handover_ok(1.0, 0.79) and not J.handover_ok(0.0, 0.0)
    # side stream: at least 90% of the spin, at most (spin + bracket) + 10%: double counting fails
    assert J.side_stream_ok(2.0, 2.0, 0.003) and J.side_stream_ok(1.81, 2.0, 0.003)
    assert not J.side_stream_ok(1.79, 2.0, 0.003) and not J.side_stream_ok(2.21, 2.0, 0.003)
    assert not J.side_stream_ok(4.0, 2.0, 0.003)
    # reported StepTimer cost within 2 x spread + 1 us of the measured, either way
    assert J.reported_overhead_ok(17.6, 23.4, 2.8) and not J.reported_overhead_ok(1.5, 64.4, 5.2)
    assert not J.reported_overhead_ok(40.0, 23.4, 2.8)
    assert J.starts_ok([1000, 2500], 3000, 500) and not J.starts_ok([-1100], 3000, 500)
    assert not J.starts_ok([4100], 3000, 500) and not J.starts_ok([], 3000, 500)


# ---- the product rows over runs of the truth scripts (the runs faked here; the dry run runs them) ------
def _doc(ms, own=0.0, tracing=0.0, label="load", backend="native-cupti", recs=(), causes=None):
    step = sum(ms.values())
    return {
        "steps": 20,
        "backend": backend,
        "breakdown_ms": ms,
        "breakdown_fraction": {k: v / step for k, v in ms.items()},
        "verdict": {"level": "critical",
                    "ranked": causes if causes is not None else [{"label": label, "level": "critical"}]},
        "overhead": {"own_ms_per_step": own, "tracing_ms_per_step": tracing, "ms_per_step": own + tracing,
                     "counted": ["own_work", "kernel_tracing"], "tracing_ns_per_launch": 100.0,
                     "launches_per_step": 600.0},
        "capture": {"tracing": {"mode": "lean", "steps_traced": 5}},
        "findings": list(recs),
    }


def _ran(name, truth=None, doc=None, tmp=Path("/nonexistent")):
    import gpu_truth

    return gpu_truth.Ran(name, 0, truth, doc, tmp, "")


def test_shares_rows_pass_on_the_truth_and_fail_past_it():
    import gpu_truth

    t = _truth()
    good = _doc({"load": 5.0, "transfer": 1.0, "compute": 3.0, "comm": 0.0, "host": 0.9}, own=0.1)
    rows = gpu_truth.shares_rows("x", _ran("x", t, good))
    assert [r.verdict for r in rows] == ["PASS", "PASS"], rows
    assert "load 50.0% vs 50.0%" in rows[0].measured
    bad = _doc({"load": 4.5, "transfer": 1.0, "compute": 3.5, "comm": 0.0, "host": 1.0}, label="host")
    rows = gpu_truth.shares_rows("x", _ran("x", t, bad))
    assert [r.verdict for r in rows] == ["FAIL", "FAIL"] and "(-5.0)" in rows[0].measured
    # a figure run.json lacks: the shares are shown, the row fails naming it
    lacking = dict(good, overhead={"own_ms_per_step": 0.1})
    row = gpu_truth.shares_rows("x", _ran("x", t, lacking))[0]
    assert row.verdict == "FAIL" and row.measured.startswith("run.json has no overhead.tracing_ms_per_step")
    # no truth line (the script failed): both rows fail, saying so
    rows = gpu_truth.shares_rows("x", _ran("x", None, good))
    assert [r.verdict for r in rows] == ["FAIL", "FAIL"] and "no truth line" in rows[0].measured


def test_the_launch_bound_rows_read_each_run_for_what_it_is(monkeypatch):
    # bare twice around the perfcore runs, --no-kernels, default, torch.profiler: which figure is
    # judged against which is the row's logic; a mix-up (default's cost judged as --no-kernels') fails.
    import gpu_truth

    def truth(step):
        return dict(_truth(step), share={"load": 0, "transfer": 0, "compute": 0.1, "comm": 0, "host": 0.9},
                    band={"load": [0, 0], "transfer": [0, 0], "compute": [0, 0.1], "comm": [0, 0],
                          "host": [0.9, 1.0]})

    ms = {"load": 0.0, "transfer": 0.0, "compute": 0.3, "comm": 0.0, "host": 4.6}
    runs = {
        "launch_bare": _ran("b", truth(5.0)),
        "launch_bare_again": _ran("b2", truth(5.0)),
        "launch-bound_default": _ran("d", truth(5.10), _doc(ms, tracing=0.08, own=0.02, label="host")),
        "launch-bound_no_kernels": _ran("n", truth(5.02), _doc(ms, own=0.02, label="host")),
        "launch_torch_profiler": _ran("p", truth(6.5)),
    }
    monkeypatch.setattr(gpu_truth, "run_script", lambda name, *a, **k: runs[name])
    monkeypatch.setattr(gpu_truth, "on_gpu", lambda: True)
    rows = {r.check: r for r in gpu_truth.truth_launch()}
    assert rows["launch-bound (default): reported overhead vs measured"].verdict == "PASS"
    assert "reported 2.00, measured 2.00" in rows["launch-bound (default): reported overhead vs measured"].measured
    assert rows["launch-bound (--no-kernels): reported overhead vs measured"].verdict == "PASS"
    assert rows["launch-bound: a traced perfcore run's cost"].verdict == "PASS"  # 2% of the step
    assert rows["launch-bound: traced perfcore run vs torch.profiler"].verdict == "PASS"  # 30% vs 2%
    assert rows["launch-bound (default): verdict"].verdict == "PASS"
    # the default run costs 5% and says 2%: its own rows fail, the others do not change
    runs["launch-bound_default"] = _ran("d", truth(5.25), _doc(ms, tracing=0.08, own=0.02, label="host"))
    rows = {r.check: r for r in gpu_truth.truth_launch()}
    assert rows["launch-bound (default): reported overhead vs measured"].verdict == "FAIL"
    assert rows["launch-bound: a traced perfcore run's cost"].verdict == "FAIL"
    assert rows["launch-bound (--no-kernels): reported overhead vs measured"].verdict == "PASS"


def test_the_pinned_speedup_must_lie_in_the_advice_band(monkeypatch):
    import gpu_truth

    t = _truth(step=10.0, load=[0.0, 0.0], transfer=[0.6, 0.6], host=[0.1, 0.1])
    ms = {"load": 0.0, "transfer": 6.0, "compute": 3.0, "comm": 0.0, "host": 1.0}
    rec = {"kind": "pin_memory", "gain": {"band": [2.0, 3.0]}}
    doc = _doc(ms, label="transfer", recs=[rec])
    runs = {"transfer-bound_default": _ran("d", t, doc), "transfer-bound_no_kernels": _ran("n", t, doc),
            "transfer_bare": _ran("p", t), "transfer_pinned_bare": _ran("q", dict(t, step_ms=4.0))}
    monkeypatch.setattr(gpu_truth, "run_script", lambda name, *a, **k: runs[name])
    monkeypatch.setattr(gpu_truth, "on_gpu", lambda: True)
    row = gpu_truth.truth_transfer()[-1]
    assert row.verdict == "PASS" and "measured 2.50x" in row.measured  # 10 ms -> 4 ms in a 2-3x band
    runs["transfer_pinned_bare"] = _ran("q", dict(t, step_ms=8.0))  # 1.25x: pinning gave less than advised
    assert gpu_truth.truth_transfer()[-1].verdict == "FAIL"
    runs["transfer-bound_default"] = _ran("d", t, _doc(ms, label="transfer"))  # no pinning advice at all
    runs["transfer_pinned_bare"] = _ran("q", dict(t, step_ms=4.0))
    row = gpu_truth.truth_transfer()[-1]
    assert row.verdict == "FAIL" and "no pinning advice" in row.measured


# ---- the truth scripts on the CPU, the dry run, the check script ----------------------------------
def test_a_truth_script_prints_a_truth_that_adds_up(tmp_path):
    # The launch-bound script on the CPU (the dry run's path): one JSON line whose five labels add up
    # to its step, each share inside its band, over the steps after its warm-up.
    import json

    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_scripts" / "launch_bound.py"), "--steps", "9",
                        "--warmup", "3", "--device", "cpu", "--layers", "5"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith('{"truth"')]
    assert len(lines) == 1
    t = json.loads(lines[0])["truth"]
    assert t["steps"] == 6 and t["device"] == "cpu" and t["launches"] == 25
    assert sum(t["ms"].values()) == pytest.approx(t["step_ms"])
    assert all(lo <= t["share"][lb] + 1e-12 and t["share"][lb] <= hi + 1e-12 for lb, (lo, hi) in t["band"].items())
    assert t["ms"]["compute"] > 0 and t["ms"]["load"] == 0 == t["ms"]["transfer"]


def test_the_dry_run_runs_a_cpu_check_as_the_device_would(gc, tmp_path):
    # perfcore transfer and graph refuse without a GPU (exit 3): on the CPU their rows fail, saying so,
    # and the dry run counts that as a path that ran; a check that crashed would be a miss.
    said = []
    assert gc.dry_run(say=said.append, wheels=_device_wheels(tmp_path), run=["cli_transfer_graph"]) == 0, said
    rows = [s for s in said if s.startswith("  FAIL") or s.startswith("  PASS")]
    assert len(rows) == 2 and all("exit 3" in r for r in rows), rows
    assert any(s.startswith("CPU rows: {'FAIL': 2}") for s in said)


def test_the_dry_run_names_a_check_that_crashed(gc, monkeypatch, tmp_path):
    monkeypatch.setattr(gc, "_child", lambda name, limit: [gc.Row(name, "crashed: KeyError: 'x'", "runs", False)])
    said = []
    assert gc.dry_run(say=said.append, wheels=_device_wheels(tmp_path), run=["truth_input"]) == 1
    assert any("crashed: KeyError" in s and s.startswith("gpu_check --dry-run") for s in said)


def test_the_check_script_prints_its_rerun_first_and_bounds_its_install(tmp_path):
    # A fake python that answers the build's mode from a file: the script prints the command that
    # finishes the run before anything else, installs under a time limit, and ends a CPU-mode build with
    # exit 3 in one line; a second call (--resume) on the same sources keeps a CUDA-mode build.
    log, mode = tmp_path / "calls", tmp_path / "mode"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/bash\necho "$*" >> {log}\ncase "$*" in *"print(c[\'mode\'])"*) cat {mode};; esac\n')
    fake.chmod(0o755)
    env = dict(os.environ, PYTHON=str(fake), GPU_CHECK_STATE=str(tmp_path / "state" / "rows.jsonl"))

    def call(*args):
        log.write_text("")
        return subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), *args], capture_output=True,
                              text=True, env=env, timeout=60)

    mode.write_text("cpu\n")
    p = call("--rows", "X")
    assert p.returncode == 3
    assert p.stdout.splitlines()[:2] == ["gpu_check: to finish what this call's budget leaves, call again within "
                                         "30 s of its end:", "  bash bench/gpu_check.sh --resume --rows X"]
    assert "-m pip install -q --no-build-isolation" in log.read_text()
    assert p.stderr.strip().startswith("gpu_check: perfcore built in cpu mode") and p.stderr.count("\n") <= 1
    assert 'timeout 300 "$PY" -m pip install' in (ROOT / "bench" / "gpu_check.sh").read_text()
    p = call("--resume")  # a build that ended in CPU mode is not kept: the second call builds again
    assert "--resume" not in p.stdout and "-m pip install" in log.read_text()
    mode.write_text("cuda\n")
    p = call("--rows", "X")
    assert p.returncode == 0 and "-m pip install" in log.read_text()
    assert log.read_text().splitlines()[-1].endswith("bench/gpu_check.py --rows X")
    p = call("--resume", "--rows", "X")
    assert "already built from these sources" in p.stdout and "-m pip install" not in log.read_text()
    assert log.read_text().splitlines()[-1].endswith("bench/gpu_check.py --resume --rows X")
