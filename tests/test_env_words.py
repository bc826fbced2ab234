"""`perfcore env`'s words: every reason code that capture/environment.py makes has its words here, a
warning always says what to do, and a code from a newer version still shows its figures."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from perfcore.capture.environment import Check
from perfcore.report.words import _WORDS, check_words

ENV = Path(__file__).resolve().parents[1] / "perfcore" / "capture" / "environment.py"


def _codes_made() -> set[str]:
    """The third argument of every Check(...) in environment.py: its reason code."""
    codes = set()
    for node in ast.walk(ast.parse(ENV.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Check" and len(node.args) >= 3:
            assert isinstance(node.args[2], ast.Constant), ast.unparse(node)  # a code, never built
            codes.add(node.args[2].value)
    return codes


def test_every_code_made_has_words():
    made = _codes_made()
    assert len(made) >= 20 and made <= set(_WORDS), made - set(_WORDS)


def test_a_warning_says_what_to_do_and_an_ok_does_not():
    free = {"path": "/dev/shm", "free_bytes": 64 * 1024**2, "fs": "tmpfs"}
    value, fix = check_words(Check("x", "warn", "free_space", free))
    assert value == "0.1 GiB free (tmpfs)" and "0.06 GiB" in fix and "--shm-size" in fix
    assert check_words(Check("x", "ok", "free_space", free))[1] == ""
    nofile = {"soft": 1024, "hard": 4096, "suggested": 4096}
    assert check_words(Check("x", "warn", "nofile", nofile)) == (
        "soft 1024, hard 4096",
        "DataLoader workers pass tensors through file descriptors: ulimit -n 4096",
    )


def test_an_unknown_code_or_odd_figures_show_the_figures():
    assert check_words(Check("x", "warn", "newer_check", {"x": 3})) == ("x 3", "")
    assert check_words(Check("x", "ok", "ram", {"free": 1})) == ("free 1", "")


def test_a_sampler_without_nvml_keeps_the_error_and_the_words_say_it(monkeypatch):
    import sys

    from perfcore.capture.sampler import Sampler
    from perfcore.report.words.runs import sampling_words

    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    s = Sampler(0.05)
    s._open_nvml()
    assert s.nvml_error.startswith("ModuleNotFoundError: ") and s._nvml is None
    assert sampling_words(s.nvml_error) == f"no GPU sampling ({s.nvml_error}); CPU and RAM only"
    assert sampling_words("") == ""


def test_no_driver_is_said_as_no_driver_not_as_an_old_one(monkeypatch):
    # The CUDA runtime answers "driver version is insufficient" where there is no driver at all.
    import ctypes

    from perfcore import _native

    insufficient = "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version"

    def missing(name, *a, **k):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert _native._why_no_device(insufficient) == "no NVIDIA driver on this machine: libcuda.so.1 not found"
    # A driver that is there and older than the runtime: the runtime's words are true.
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: object())
    assert _native._why_no_device(insufficient) == insufficient
    hidden = "cudaErrorNoDevice: no CUDA-capable device is detected"
    assert _native._why_no_device(hidden) == hidden


def test_env_on_a_machine_without_a_driver_says_there_is_none():
    import ctypes
    import subprocess
    import sys

    import perfcore

    if not perfcore.capabilities()["cuda_compiled"]:
        pytest.skip("perfcore was built in CPU mode: env names the build's reason, not the driver")
    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("this machine has an NVIDIA driver")
    except OSError:
        pass
    p = subprocess.run([sys.executable, "-m", "perfcore", "env"], capture_output=True, text=True, timeout=120)
    (gpu,) = [ln for ln in p.stdout.splitlines() if ln.split()[1:2] == ["gpu"]]
    assert "no NVIDIA driver on this machine" in gpu and "insufficient" not in p.stdout, p.stdout
