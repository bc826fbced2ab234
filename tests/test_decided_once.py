"""Each command decides its verdict and its advice once, where all of its evidence exists, and every
output renders that one decision: counted by a profile hook on the deciding functions' code."""
from __future__ import annotations

import collections
import contextlib
import sys
import threading
from pathlib import Path

from click.testing import CliRunner

from perfcore.analysis import advice, verdict

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@contextlib.contextmanager
def counted():
    """Calls of verdict.decide and advice.advise on every thread, however the name was imported. A trace
    hook, not a profile hook: diagnose's worker profile (cProfile) takes the profile hook over."""
    codes = {verdict.decide.__code__: "decide", advice.advise.__code__: "advise"}
    counts: collections.Counter = collections.Counter()

    def hook(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            counts[codes[frame.f_code]] += 1
        return None  # no line events

    sys.settrace(hook)
    threading.settrace(hook)
    try:
        yield counts
    finally:
        sys.settrace(None)
        threading.settrace(None)


def test_run_decides_once(tmp_path):
    from perfcore.cli import cli

    out = tmp_path / "run"
    with counted() as n:
        res = CliRunner().invoke(cli, ["run", "--out", str(out), "--warmup", "2", "--", sys.executable,
                                       str(SCRIPTS / "tiny_loop.py"), "40"])
    assert res.exit_code == 0, res.output
    assert (out / "run.json").is_file()
    assert n == {"decide": 1, "advise": 1}, n


def test_diagnose_decides_once():
    from perfcore.experiments.diagnose import diagnose
    from perfcore.workloads import load_workload

    w = load_workload("demo")
    with counted() as n:
        d = diagnose(w, steps=3, warmup=1)
    assert d.verdict.bound != "unknown" and d.verdict.checks
    assert n == {"decide": 1, "advise": 1}, n


def test_demo_decides_once(tmp_path):
    from perfcore.experiments import demo

    (tmp_path / "demo").mkdir()
    with counted() as n:
        doc = demo.run_demo(tmp_path / "demo", quick=True)
    assert n == {"decide": 1, "advise": 1}, n
    # Every output of the demo renders that one decision.
    assert doc.run.verdict is doc.diagnose.verdict
    assert doc.run.findings is doc.diagnose.findings
