"""Signals a run gets from the world: to perfcore's pid alone (an IDE's stop button, a supervisor,
`kill`) or to the whole process group (a terminal's Ctrl-C, a closed terminal, `timeout`). Each must
stop the script, keep the steps measured so far, and print no perfcore traceback."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

SCRIPT = str(Path(__file__).resolve().parent / "scripts" / "until_stopped.py")


def start(out: Path, *args: str) -> subprocess.Popen:
    # A session of its own: no controlling terminal, and a group the test can signal as a shell would.
    return subprocess.Popen([sys.executable, "-m", "perfcore.cli", "run", "--warmup", "0", "--out", str(out), "--",
                             sys.executable, SCRIPT, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for(proc: subprocess.Popen, word: str) -> None:
    line = proc.stdout.readline()
    assert line.strip() == word, (line, proc.stderr.read() if proc.poll() is not None else "")


def perfcore_frames(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip().startswith("File ") and "/perfcore/" in line]


def children(proc: subprocess.Popen) -> list[psutil.Process]:
    return psutil.Process(proc.pid).children(recursive=True)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 143)],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("to", ["parent", "group"])
def test_a_stop_signal_keeps_the_results_and_leaves_no_orphan(tmp_path, signum, code, to):
    out = tmp_path / "r"
    proc = start(out)
    wait_for(proc, "TRAINING")
    kids = children(proc)
    (os.kill if to == "parent" else os.killpg)(proc.pid, signum)
    stdout, stderr = proc.communicate(timeout=90)
    assert not [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE], "the script trains on"
    # SIGHUP to the group reaches the script itself too: it ends by SIGHUP's handler (129) or by the
    # SIGTERM perfcore passes on (143), whichever comes first.
    assert proc.returncode in ((code, 129) if signum == signal.SIGHUP and to == "group" else (code,)), stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] >= 20, doc["steps"]
    assert doc["exit"]["reason"] in ("interrupted", "terminated"), doc["exit"]
    assert not perfcore_frames(stderr), stderr  # the script's own KeyboardInterrupt traceback is Python's


def test_three_quick_ctrl_c_keep_the_results(tmp_path):
    out = tmp_path / "r"
    proc = start(out)
    wait_for(proc, "TRAINING")
    for _ in range(3):
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.02)
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 130, stderr
    assert json.loads((out / "run.json").read_text())["steps"] >= 20


@pytest.mark.parametrize("times", [1, 2])
def test_sigterm_during_the_scripts_own_exit_prints_no_perfcore_traceback(tmp_path, times):
    out = tmp_path / "r"
    proc = start(out, "atexit")
    wait_for(proc, "EXITING")
    kid = children(proc)[0]
    for _ in range(times):  # `timeout` sends TERM, then TERM again
        try:
            kid.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            break  # the script wrote its results and died of the first before the second was sent
        time.sleep(0.01)
    stdout, stderr = proc.communicate(timeout=90)
    assert "Exception ignored" not in stderr and "Traceback" not in stderr, stderr
    assert proc.returncode == 143, stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] == 20 and doc["exit"]["reason"] == "terminated"


COUNT_SIGINT = """
import signal, sys, time
got = []
signal.signal(signal.SIGINT, lambda *a: got.append(time.monotonic()))
print("READY", flush=True)
end = time.monotonic() + 60
while not got and time.monotonic() < end:
    time.sleep(0.01)
time.sleep(1.5)  # room for a second copy to arrive
print("SIGINTS", len(got), flush=True)
"""


@pytest.mark.parametrize("to", ["parent", "group"])
def test_one_sigint_reaches_the_script_once(tmp_path, to):
    """A signal to the process group reaches the script by itself: perfcore passes on only what the
    script did not get (a second copy lands in the script's own Ctrl-C handling, or in the writing of
    the results). To perfcore's pid alone, it is passed on."""
    proc = subprocess.Popen([sys.executable, "-m", "perfcore.cli", "run", "-q", "--out", str(tmp_path / "r"), "--",
                             sys.executable, "-c", COUNT_SIGINT],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for(proc, "READY")
    (os.kill if to == "parent" else os.killpg)(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 0, stderr
    assert [line for line in stdout.splitlines() if line.startswith("SIGINTS")] == ["SIGINTS 1"], (stdout, stderr)


@pytest.mark.parametrize("how, code, last", [("ctrl-c", 130, "KeyboardInterrupt"),
                                              ("value", 1, "ValueError: bad sample 240")])
def test_an_exception_through_perfcores_code_is_shown_where_the_script_was(tmp_path, how, code, last):
    """A Ctrl-C, or the Dataset's own error, passes through perfcore's fetch wrapper on its way out: the
    traceback the user sees holds the script's and the libraries' frames only, and the steps before it are kept."""
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--warmup", "0", "--out", str(out), "--",
                        sys.executable, str(Path(SCRIPT).parent / "interrupted_in_loader.py"), how],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == code, p.stderr
    assert f"\n{last}\n" in p.stderr and "in __getitem__" in p.stderr, p.stderr
    assert not perfcore_frames(p.stderr), p.stderr
    assert json.loads((out / "run.json").read_text())["steps"] >= 25


def test_own_frames_are_taken_out_of_a_traceback_and_the_rest_kept_in_order():
    from perfcore.recording.own_work import OwnWork
    from perfcore.run.child.exits import without_own_frames

    class Rec:
        def record(self, *a):
            raise KeyboardInterrupt

    try:
        with OwnWork(Rec(), time.perf_counter_ns):  # perfcore's __exit__ calls back into this file
            pass
    except KeyboardInterrupt as e:
        tb = e.__traceback__
    names = []
    t = tb
    while t is not None:
        names.append((Path(t.tb_frame.f_code.co_filename).parent.name, t.tb_frame.f_code.co_name))
        t = t.tb_next
    assert ("recording", "__exit__") in names  # it went through perfcore
    kept = []
    t = without_own_frames(tb)
    while t is not None:
        kept.append(t.tb_frame.f_code.co_name)
        t = t.tb_next
    assert kept == [n for d, n in names if d != "recording"] == [
        "test_own_frames_are_taken_out_of_a_traceback_and_the_rest_kept_in_order", "record"]
    assert without_own_frames(None) is None
    # Raised by perfcore itself (innermost frame its own): a perfcore error, shown whole.
    from perfcore.capture.line_sampler import LineSampler
    from perfcore.run.child.exits import _raised_by_own

    try:
        LineSampler(interval_s=0)
    except Exception as e:
        own = e.__traceback__
    assert _raised_by_own(own) and not _raised_by_own(tb)
    # Raised in a library perfcore called (json, from perfcore's writer): perfcore's, shown whole too.
    from perfcore import jsonio

    try:
        jsonio.dumps({1j: 1})
    except TypeError as e:
        lib = e.__traceback__
    assert "json" in _innermost(lib) and _raised_by_own(lib)


def _innermost(tb) -> str:
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename


def test_errors_chained_to_the_scripts_error_lose_perfcores_frames_too():
    from perfcore.recording.own_work import OwnWork
    from perfcore.run.child.exits import tidy

    class Rec:
        def record(self, *a):
            raise ValueError("the script's, through perfcore's __exit__")

    def frames(e):
        out, tb = [], e.__traceback__
        while tb is not None:
            out.append(tb.tb_frame.f_code.co_filename)
            tb = tb.tb_next
        return out

    try:
        try:
            with OwnWork(Rec(), time.perf_counter_ns):
                pass
        except ValueError as inner:
            raise RuntimeError("the script's handler") from inner
    except RuntimeError as e:
        outer = e
    assert any("/perfcore/" in f for f in frames(outer.__cause__))
    tidy(outer)
    assert not any("/perfcore/" in f for f in frames(outer.__cause__)) and frames(outer.__cause__)
    assert outer.__context__ is outer.__cause__
