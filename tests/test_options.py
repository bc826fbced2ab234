"""The numbers a user gives (CLI options and `%%perfcore` arguments) are checked by one function each."""
from __future__ import annotations

import sys
import types

import pytest

from perfcore.errors import UsageError
from perfcore.run.options import duration, number


@pytest.mark.parametrize("text, kind, low, says", [
    ("nan", float, None, "not a finite number"), ("inf", float, None, "not a finite number"),
    ("-inf", int, 0, "not a whole number"), ("abc", int, 1, "not a whole number"), ("1.5", int, 1, "not a whole number"),
    ("0", int, 1, "must be >= 1"), ("-3", int, 0, "must be >= 0"), ("", float, None, "not a number"),
    (float("nan"), float, None, "not a finite number"), (True, int, 0, "not a whole number"),
])
def test_bad_numbers(text, kind, low, says):
    with pytest.raises(UsageError, match=says):
        number(text, "--x", kind=kind, low=low)


def test_good_numbers_and_durations():
    assert number(" 7 ", "--steps", kind=int, low=1) == 7
    assert number("-2.5", "--fail-above") == -2.5
    assert duration("100ms", "--interval") == pytest.approx(0.1)
    assert duration("0.5s", "--interval") == 0.5 and duration(2, "--interval") == 2.0
    for bad in ("nan", "infms", "0", "1ms", "-1s", "fast", ""):
        with pytest.raises(UsageError, match="--interval"):
            duration(bad, "--interval")


@pytest.fixture
def magic(monkeypatch):
    """The %%perfcore cell magic, registered on a stand-in for IPython (not needed for the argument checks)."""
    registered = {}
    mm = types.ModuleType("IPython.core.magic")
    mm.register_cell_magic = lambda name: (lambda f: registered.setdefault(name, f))
    for name, mod in (("IPython", types.ModuleType("IPython")), ("IPython.core", types.ModuleType("IPython.core")),
                      ("IPython.core.magic", mm)):
        monkeypatch.setitem(sys.modules, name, mod)
    from perfcore.run.child import magic as m

    m.load_ipython_extension(types.SimpleNamespace(user_ns={}))
    return registered["perfcore"]


@pytest.mark.parametrize("line, says", [
    ("--steps 0", "--steps: must be >= 1, got 0"), ("--steps -1", "--steps: must be >= 1"),
    ("--steps abc", "not a whole number"), ("--steps nan", "not a whole number"),
    ("--warmup -1", "--warmup: must be >= 0"), ("--bogus 3", "unrecognized arguments"),
    ("--steps 'x", "No closing quotation"),
])
def test_magic_arguments_are_one_line_and_run_nothing(magic, capsys, line, says):
    ran = {}
    assert magic(line, "ran['cell'] = True") is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("perfcore: error:") and says in err[0], err
    assert not ran


@pytest.mark.parametrize("interval", [float("nan"), float("inf"), 0.0, -0.1])
def test_the_sampler_refuses_an_interval_it_would_spin_on(interval):
    from perfcore.capture.sampler import Sampler

    with pytest.raises(UsageError, match="finite number of seconds"):
        Sampler(interval)
