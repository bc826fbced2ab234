"""Each command decides its verdict and its advice once, where all of its evidence exists, and every
output renders that one decision: counted on the deciding functions themselves, on every thread."""
from __future__ import annotations

import collections
import contextlib
import functools
import sys
import types
from pathlib import Path

from click.testing import CliRunner

from perfcore.analysis import advice, verdict

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _counting(*args, _count=None, _original=None, **kwargs):
    _count()
    return _original(*args, **kwargs)


@contextlib.contextmanager
def counted():
    """Calls of verdict.judge (the one decision: decide and decide_run end in it) and advice.advise on every
    thread, however the name was imported: each function object, which every importer holds, runs for the
    while a code that counts the call and then runs its own code. Not a trace hook: one slows every Python
    call in the process by half (diagnose's), and diagnose's worker profile (cProfile) takes the profile
    hook over."""
    counts: collections.Counter = collections.Counter()
    saved = []
    for fn, name in ((verdict.judge, "judge"), (advice.advise, "advise")):
        own = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        own.__kwdefaults__ = fn.__kwdefaults__
        saved.append((fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__))
        fn.__code__, fn.__defaults__ = _counting.__code__, None
        fn.__kwdefaults__ = {"_count": functools.partial(counts.update, (name,)), "_original": own}
    try:
        yield counts
    finally:
        for fn, code, defaults, kwdefaults in saved:
            fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults


def test_run_decides_once(tmp_path):
    from perfcore.cli import cli

    out = tmp_path / "run"
    with counted() as n:
        res = CliRunner().invoke(cli, ["run", "--out", str(out), "--warmup", "2", "--", sys.executable,
                                       str(SCRIPTS / "tiny_loop.py"), "40"])
    assert res.exit_code == 0, res.output
    assert (out / "run.json").is_file()
    assert n == {"judge": 1, "advise": 1}, n


def test_diagnose_decides_once():
    from perfcore.experiments.diagnose import diagnose
    from perfcore.workloads import load_workload

    w = load_workload("demo")
    with counted() as n:
        d = diagnose(w, steps=3, warmup=1)
    assert d.verdict.bound != "unknown" and d.verdict.checks
    assert n == {"judge": 1, "advise": 1}, n


def test_demo_decides_once(tmp_path):
    from perfcore.experiments import demo

    (tmp_path / "demo").mkdir()
    with counted() as n:
        doc = demo.run_demo(tmp_path / "demo", quick=True)
    assert n == {"judge": 1, "advise": 1}, n
    # Every output of the demo renders that one decision.
    assert doc.run.verdict is doc.diagnose.verdict
    assert doc.run.findings is doc.diagnose.findings
