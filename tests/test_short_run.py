"""A short run costs little more than its script: the script starts before numpy/pandas load, what
finishing needs loads during the script on a lower-priority thread, and the run folder's charts are
drawn without matplotlib. (The times themselves: bench/bench_short_run.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfcore.report import plots
from steps_tables import steps_table

TESTS = Path(__file__).parent


def run_py(code: str, timeout: int = 240) -> str:
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_finishing_a_run_folder_never_imports_matplotlib(tmp_path):
    """breakdown.png, kernels.png and monitor.png of a run, all three drawn, no matplotlib loaded."""
    code = f"""
import sys
from pathlib import Path
import json
import numpy as np, pandas as pd
from test_finish_scale import long_part
from perfcore import jsonio
from perfcore.run.parent.finish import finish_run
out = Path({str(tmp_path)!r})
part = long_part(out, 40)
doc = json.loads((part / "run.json").read_text())
doc["kernels"] = [{{"name": "volta_sgemm_128x64_nn", "count": 40, "total_ms": 12.0, "mean_us": 300.0}}]
jsonio.write(part / "run.json", doc)
start = int(np.load(part / "trace.npz")["step_start_ns"][0])
samples = pd.DataFrame({{"t_ns": start + np.arange(20) * 10_000_000, "cpu_percent": np.linspace(10, 90, 20),
                         "ram_used_bytes": np.full(20, 2.0 ** 31)}})
doc = finish_run(out, 0, ["python", "train.py"], samples=samples)
print(sorted(doc.files))
print("matplotlib" in sys.modules)
"""
    lines = run_py(code).strip().splitlines()
    assert {"breakdown.png", "kernels.png", "monitor.png"} <= set(eval(lines[-2]))  # noqa: S307 - our own list
    assert lines[-1] == "False"
    for name in ("breakdown.png", "kernels.png", "monitor.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_script_starts_before_pandas_and_finishing_loads_while_it_runs(tmp_path):
    """`perfcore run` up to the script's start loads neither numpy nor pandas; once the script's
    process exists a warm-up thread, at a lower priority than the rest of perfcore, loads them."""
    code = f"""
import os, sys, threading, time
from pathlib import Path
import perfcore.cli.measure
from perfcore.run.parent import launch

def child(cmd, env, stdout_to_stderr=False, on_start=None):
    print("pandas at start", "pandas" in sys.modules, "numpy" in sys.modules)
    if on_start is not None:
        on_start()
    warm = next((t for t in threading.enumerate() if t.name == "perfcore-warm-up"), None)
    t0 = time.monotonic()
    while warm is not None and "pandas" not in sys.modules and time.monotonic() - t0 < 180:
        time.sleep(0.01)
    print("warm-up thread", warm is not None)
    if sys.platform.startswith("linux") and warm is not None and warm.is_alive():
        print("nicer", os.getpriority(os.PRIO_PROCESS, warm.native_id) > os.getpriority(os.PRIO_PROCESS, 0))
    print("pandas while the script runs", "pandas" in sys.modules)
    return 0

launch.run_child = child
settings = launch.RunSettings(warmup=0, backend="host", kernels=False, monitor_s=None)
launch.run_command([sys.executable, "-c", "pass"], settings, out=Path({str(tmp_path / "r")!r}), quiet=True)
print("warm-up done", not any(t.name == "perfcore-warm-up" for t in threading.enumerate()))
"""
    out = run_py(code)
    assert "pandas at start False False" in out and "warm-up thread True" in out
    assert "pandas while the script runs True" in out
    assert "warm-up done True" in out
    assert "nicer False" not in out  # when the thread was caught while still warming, it was below the others


def test_warm_up_stops_after_the_module_it_is_on_and_says_what_it_loaded():
    from perfcore.run.parent.warm import WarmUp

    w = WarmUp(modules=("json", "perfcore_no_such_module", "csv"), nice=0, look=lambda stop: True)
    w.start()
    w._thread.join(60)
    assert not w._thread.is_alive()  # with nothing to do ahead of the finish, its work ends with its imports
    assert w.stop() == ["json", "csv", "fonts"]  # a module that fails is left to finishing to report
    idle = WarmUp(modules=("json",))
    idle._stop.set()
    idle.start()
    assert idle.stop() == [] and not idle._thread.is_alive()


def test_warm_up_imports_only_while_a_core_is_spare_and_a_stop_never_waits_for_one():
    import threading

    from perfcore.run.parent.warm import WarmUp

    spare, looked = threading.Event(), threading.Semaphore(0)

    def look(stop):
        looked.release()
        stop.wait(0.005)
        return spare.is_set()

    w = WarmUp(modules=("json", "csv"), nice=0, look=look)
    w.start()
    for _ in range(5):  # five looks at a machine with no spare core: nothing imported
        assert looked.acquire(timeout=30)
    assert w.done == [] and w.waits >= 4
    spare.set()
    w._thread.join(60)
    assert w.stop() == ["json", "csv", "fonts"]

    def never(stop):
        stop.wait(0.005)
        return False

    busy = WarmUp(modules=("json",), nice=0, look=never)
    busy.start()
    assert busy.stop() == [] and not busy._thread.is_alive()  # the finish imports it itself


def test_warm_up_goes_on_without_a_spare_core_once_the_script_writes_its_results(tmp_path):
    import threading

    from perfcore.run.parent.warm import WarmUp, results_begun

    out = tmp_path / "run"
    (out / "parts" / "pid1-0123abcd" / "checkpoint").mkdir(parents=True)
    begun = results_begun(out)
    looked = threading.Semaphore(0)

    def never(stop):  # a machine with no spare core, two burners beside the script
        looked.release()
        stop.wait(0.005)
        return False

    w = WarmUp(modules=("json", "csv"), nice=0, look=never, ending=begun)
    w.start()
    for _ in range(3):  # training: a checkpoint is all a part holds, nothing imported
        assert looked.acquire(timeout=30)
    assert w.done == [] and not w.ended
    (out / "parts" / "pid1-0123abcd" / ".raw.123-abcdef.tmp.npz").write_bytes(b"")  # its results, begun
    w._thread.join(60)
    assert w.ended and w.stop() == ["json", "csv", "fonts"]


def test_the_parts_are_finished_while_the_scripts_process_is_still_exiting(tmp_path):
    """The finishing work that needs nothing from the script's exit starts beside its end: the script's
    interpreter, still tearing down after perfcore wrote its raw part, sees its part finished (run.json),
    with no spare core asked for (ending overrides the looks)."""
    script = tmp_path / "slow_exit.py"
    marker = tmp_path / "saw.txt"
    script.write_text(
        "import glob, os, time\nimport torch\n"
        "m = torch.nn.Linear(8, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(30):\n"
        "    loss = m(torch.randn(4, 8)).sum()\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
        "class SlowExit:  # its module's globals are cleared after every atexit handler: perfcore's part is written\n"
        "    def __del__(self, glob=glob, time=time, open=open):\n"
        "        deadline = time.monotonic() + 60\n"
        "        while time.monotonic() < deadline and not glob.glob(os.environ['OUT'] + '/parts/*/run.json'):\n"
        "            time.sleep(0.05)\n"
        "        with open(os.environ['MARKER'], 'w') as f:\n"
        "            f.write(str(bool(glob.glob(os.environ['OUT'] + '/parts/*/run.json'))))\n"
        "slow = SlowExit()\n"
    )
    out = tmp_path / "r"
    env = {**os.environ, "OUT": str(out), "MARKER": str(marker), "PYTHONPATH": str(TESTS.parent)}
    r = subprocess.run(
        [sys.executable, "-m", "perfcore.cli", "run", "--quiet", "--out", str(out), "--", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert marker.read_text() == "True"
    doc = __import__("json").loads((out / "run.json").read_text())
    assert doc["steps"] + doc["warmup_steps"] == 30


def test_warm_up_does_what_finishing_can_ahead_only_once_the_script_writes_its_results():
    import threading

    from perfcore.run.parent.warm import WarmUp

    ended, calls = threading.Event(), threading.Semaphore(0)
    w = WarmUp(modules=("json",), nice=0, look=lambda stop: True, ending=ended.is_set, ahead=calls.release)
    w.start()
    assert not calls.acquire(timeout=1.0)  # training: nothing done ahead
    ended.set()
    assert calls.acquire(timeout=30) and calls.acquire(timeout=30)  # then every look, until stopped
    assert w.stop() == ["json", "fonts"] and not w._thread.is_alive()


def test_results_begun_reads_only_real_part_folders(tmp_path):
    from perfcore.run.parent.warm import results_begun

    out = tmp_path / "run"
    begun = results_begun(out)
    assert not begun()  # no folder yet
    (out / "parts").mkdir(parents=True)
    assert not begun()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "raw.json").mkdir(parents=True)
    (out / "parts" / "pid2-0123abcd").symlink_to(elsewhere)
    assert not begun()  # a link is never a part
    (out / "parts" / "pid1-0123abcd").mkdir()
    (out / "parts" / "pid1-0123abcd" / "raw.json").write_text("{}")
    assert begun()


def test_a_spare_core_is_most_of_one_core_idle_over_the_look():
    from perfcore.run.parent.warm import spare_core

    def stat(total, busy, steal=0):
        return {"total_ticks": total, "busy_ticks": busy, "steal_ticks": steal}

    before = stat(1000, 500)
    assert spare_core(before, stat(1050, 525), cpus=2)  # half the machine idle: one core spare
    assert not spare_core(before, stat(1050, 545), cpus=2)  # 5 of 50 ticks idle: both cores in use
    assert not spare_core(before, stat(1050, 525, steal=20), cpus=2)  # stolen time is not idle
    assert spare_core(before, stat(1100, 575), cpus=4)  # 25 of 100 ticks idle on 4 cores: one of them
    assert not spare_core(before, before, cpus=2)  # no ticks passed: cannot say it is spare


def test_ticks_are_round_and_inside_the_range():
    for lo, hi in [(0, 1), (0, 7.3), (0, 18_000.0), (3, 100_000), (0.0, 0.004)]:
        t = plots.nice_ticks(lo, hi)
        assert 3 <= len(t) <= 11 and lo - 1e-9 <= t[0] and t[-1] <= hi + 1e-9, (lo, hi, t)
        steps = np.diff(t)
        assert np.allclose(steps, steps[0])
        mantissa = steps[0] / 10 ** np.floor(np.log10(steps[0]))
        assert any(np.isclose(mantissa, m) for m in (1, 2, 2.5, 5)), t
    assert all(float(v).is_integer() for v in plots.nice_ticks(0, 7, integer=True))
    assert plots.nice_ticks(5, 5) == [5]


def test_breakdown_png_axes_have_units_not_exponents(tmp_path, monkeypatch):
    from perfcore.report.plots import plot_breakdown

    texts = []
    real = plots.Figure.text

    def keep(fig, xy, s, *a, **k):
        texts.append(s)
        return real(fig, xy, s, *a, **k)

    monkeypatch.setattr(plots.Figure, "text", keep)
    plot_breakdown(steps_table(100_000, means=(4000.0, 0.0, 14000.0, 0.0, 300.0)), tmp_path / "b.png")
    ms = [s for s in texts if re.fullmatch(r"(0|[\d.]+ (ms|s))", s)]
    assert len(ms) >= 3 and any(s.endswith(" s") for s in ms), texts
    assert not [s for s in texts if "e+" in s or "e-0" in s]
    steps = [s for s in texts if re.fullmatch(r"[\d.]+k?", s) and s != "0"]
    assert "100k" in steps and all(len(s) <= 5 for s in steps), steps


def test_charts_draw_with_pillows_own_font_when_matplotlibs_is_missing(tmp_path, monkeypatch):
    import importlib.util

    from perfcore.report.plots import plot_kernels

    plots._font.cache_clear()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    try:
        path = plot_kernels([{"name": "k" * 90, "count": 1, "total_ms": 3.0, "mean_us": 3000.0}], tmp_path / "k.png")
    finally:
        plots._font.cache_clear()
    from PIL import Image

    with Image.open(path) as im:
        assert im.size[0] == 1100 and len(np.unique(np.asarray(im.convert("L")))) > 2  # text and a bar, not a blank


def test_a_kernel_chart_keeps_the_largest_on_top(tmp_path, monkeypatch):
    from perfcore.report.plots import plot_kernels

    placed = {}
    real = plots.Figure.text

    def keep(fig, xy, s, *a, **k):
        placed[s] = xy[1]
        return real(fig, xy, s, *a, **k)

    monkeypatch.setattr(plots.Figure, "text", keep)
    ks = [{"name": f"kernel_{i}", "count": 1, "total_ms": 10.0 - i, "mean_us": 1.0} for i in range(5)]
    plot_kernels(ks, tmp_path / "k.png")
    ys = [placed[f"kernel_{i}"] for i in range(5)]
    assert ys == sorted(ys) and len(set(ys)) == 5  # one row each, in the order given, top down


@pytest.mark.parametrize("n", [1, 3])
def test_tiny_runs_still_draw(tmp_path, n):
    from perfcore.report.plots import plot_breakdown, plot_timeline

    plot_breakdown(steps_table(n), tmp_path / "b.png")
    plot_timeline(
        pd.DataFrame({"t_ns": np.arange(n), "cpu_percent": np.ones(n), "ram_used_bytes": np.ones(n)}),
        tmp_path / "t.png",
    )
    assert (tmp_path / "b.png").stat().st_size > 1000 and (tmp_path / "t.png").stat().st_size > 1000


def test_looks_judge_a_window_with_the_warm_ups_own_imports_counted_as_idle():
    import threading

    from perfcore.run.parent.warm import LOOK_S, Looks

    def stat(total, busy):
        return {"total_ticks": total, "busy_ticks": busy, "steal_ticks": 0}

    reads = iter([stat(0, 0), stat(100, 50), stat(200, 140), stat(300, 235), stat(400, 335), stat(500, 385)])
    t, cpu = [0.0], [0.0]
    looks = Looks(read=lambda: next(reads), clock=lambda: t[0], cpu=lambda: cpu[0], cpus=2)
    looks._tick = 100
    stop = threading.Event()
    assert looks(stop) is True  # a first window (waited): half of two cores idle
    t[0] += LOOK_S / 2
    assert looks(stop) is True  # inside the window that found a spare core: no wait, no read
    t[0] += LOOK_S
    cpu[0] = 0.4  # the warm-up's own imports took 40 of the window's 100 ticks
    assert looks(stop) is True  # 10 idle + 40 its own: a core it would give way on
    t[0] += LOOK_S
    assert looks(stop) is False  # 5 of 100 idle: the script and others hold both cores
    assert looks(stop) is True  # a new window, waited for: 50 idle again
    stop.set()
    assert Looks(read=lambda: stat(0, 0))(stop) is None  # stopped while looking
    assert Looks(read=lambda: (_ for _ in ()).throw(OSError("no /proc")))(threading.Event()) is None
