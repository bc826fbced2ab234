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
    from perfcore.capture.calibration import EVENT_RESOLUTION_NS, duration_tolerance_ns

    # A 50 us kernel: 1% (0.5 us) is finer than two event resolutions, so those set the bound.
    assert duration_tolerance_ns(50_000, 0) == 2 * EVENT_RESOLUTION_NS
    assert duration_tolerance_ns(50_000, 3_000) == 2 * EVENT_RESOLUTION_NS + 3_000  # a busy device's jitter
    assert duration_tolerance_ns(10_000_000, 0) == 100_000  # long kernels: 1%


def test_dry_run_imports_what_every_check_uses_and_prints_each_row():
    # The table a lent GPU would decide, checked here: every import every check makes resolves
    # (a renamed function fails now, not on the device), and every check has rows with targets.
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("| ") and not ln.startswith("| check")]
    named = {ln.split(" | ")[0][2:] for ln in lines}
    from gpu_check import CHECKS  # noqa: E402 (the module fixture registered it)

    assert named == set(CHECKS)
    assert all(ln.rstrip(" |").split(" | ")[-1].strip() for ln in lines)


def test_dry_run_names_an_import_that_does_not_resolve(gc, monkeypatch):
    monkeypatch.setitem(gc.USES, "graph_speed", ("perfcore.experiments.graph:compare_runs",))
    said = []
    assert gc.dry_run(say=said.append) == 1
    assert any("graph_speed: perfcore.experiments.graph has no compare_runs" in s for s in said)


def test_each_defect_has_a_row(gc):
    for name in ("side_stream", "named_device", "in_flight_at_stop", "torch_profiler", "graph_before_cupti",
                 "torch_loop_drain", "torch_profiler_mid_run"):
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


def test_a_carried_package_is_found_installed_or_as_a_wheel(gc, tmp_path, monkeypatch):
    # cupti-python reaches the device as a wheel in .whl/: missing both here is said, not hidden.
    monkeypatch.setitem(gc.CARRIED, "perfcore_no_such_pkg", "perfcore_no_such_pkg-")
    assert "fetch_wheels.sh" in gc._carried("perfcore_no_such_pkg", tmp_path)
    (tmp_path / "perfcore_no_such_pkg-1.0-py3-none-any.whl").write_text("")
    assert gc._carried("perfcore_no_such_pkg", tmp_path) is None
