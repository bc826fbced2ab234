"""`perfcore env`'s words: every reason code that capture/environment.py makes has its words here, a
warning always says what to do, and a code from a newer version still shows its figures."""

from __future__ import annotations

import ast
from pathlib import Path

from perfcore.report.env_words import _WORDS, check_words

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
    value, fix = check_words({"status": "warn", "code": "free_space", "figures": free})
    assert value == "0.1 GiB free (tmpfs)" and "0.06 GiB" in fix and "--shm-size" in fix
    assert check_words({"status": "ok", "code": "free_space", "figures": free})[1] == ""
    nofile = {"soft": 1024, "hard": 4096, "suggested": 4096}
    assert check_words({"status": "warn", "code": "nofile", "figures": nofile}) == (
        "soft 1024, hard 4096",
        "DataLoader workers pass tensors through file descriptors: ulimit -n 4096",
    )


def test_an_unknown_code_or_odd_figures_show_the_figures():
    assert check_words({"status": "warn", "code": "newer_check", "figures": {"x": 3}}) == ("x 3", "")
    assert check_words({"status": "ok", "code": "ram", "figures": {"free": 1}}) == ("free 1", "")


def test_a_sampler_without_nvml_keeps_the_error_and_the_words_say_it(monkeypatch):
    import sys

    from perfcore.capture.sampler import Sampler
    from perfcore.report.env_words import sampling_words

    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    s = Sampler(0.05)
    s._open_nvml()
    assert s.nvml_error.startswith("ModuleNotFoundError: ") and s._nvml is None
    assert sampling_words(s.nvml_error) == f"no GPU sampling ({s.nvml_error}); CPU and RAM only"
    assert sampling_words("") == ""
