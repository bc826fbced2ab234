"""scripts/code_metrics.py counts what it says it counts, on a small package made here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "code_metrics", Path(__file__).resolve().parent.parent / "scripts" / "code_metrics.py"
)
metrics = importlib.util.module_from_spec(_SPEC)
sys.modules["code_metrics"] = metrics
_SPEC.loader.exec_module(metrics)

FILES = {
    "perfcore/__init__.py": "",
    "perfcore/run/finish.py": (
        "def finish_run(d):\n"
        "    x = d.get('a')  # single quotes are not counted\n"
        '    return d.get("b")\n'
    ),
    "perfcore/report/__init__.py": "",
    # a -> b -> c, b's import inside a function; c imports nothing of report/
    "perfcore/report/a_words.py": (
        "from perfcore.report import b\n"
        "from typing import Mapping\n\n"
        "def say(doc):  # noqa: C901, PLR0912\n"
        '    if isinstance(doc, dict | Mapping):\n'
        '        return doc.get("x")\n'
        "    return isinstance(doc, (list, tuple)) or isinstance(doc, str)\n"
    ),
    "perfcore/report/b.py": "def f():\n    from perfcore.report.c import g\n\n    return g()\n\n\ndef say_more():\n    pass\n",
    "perfcore/report/c.py": "def g():\n    def sayer():\n        pass\n    return 1  # a comment\n",
}


def tree(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_each_figure_on_a_known_tree(tmp_path):
    fig = metrics.measure(tree(tmp_path))
    assert (fig["get_calls"], fig["get_calls_report"]) == (2, 1)
    assert fig["dict_isinstance_report"] == 2  # dict | Mapping, and (list, tuple); str is not a container
    assert fig["say_writers"] == ["perfcore/report/a_words.py:say", "perfcore/report/b.py:say_more"]
    assert fig["report_modules"] == 4
    assert fig["report_chain"] == ["perfcore.report.a_words", "perfcore.report.b", "perfcore.report.c"]
    assert fig["report_depth"] == 3 and fig["report_cycle"] == []
    assert fig["words_modules"] == ["perfcore/report/a_words.py"]
    assert fig["function_lines"]["finish_run"] == [("perfcore/run/finish.py:1", 3)]
    assert fig["function_lines"]["render_text"] == []
    assert fig["exemptions"] == 1
    assert (fig["files"], fig["functions"]) == (6, 6)
    assert metrics.measure(tree(tmp_path / "t"))["tokens"] == fig["tokens"]
    (tmp_path / "perfcore/report/c.py").write_text("def g():\n    return 1\n")
    assert metrics.measure(tmp_path)["tokens"] == fig["tokens"] - 6  # `def sayer ( ) : pass` went


def test_a_words_package_counts_as_its_modules(tmp_path):
    tree(tmp_path)
    for rel in ("perfcore/report/words/__init__.py", "perfcore/report/words/verdict.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert metrics.measure(tmp_path)["words_modules"] == [
        "perfcore/report/a_words.py", "perfcore/report/words/__init__.py", "perfcore/report/words/verdict.py"]


def test_a_cycle_is_named(tmp_path):
    tree(tmp_path)
    (tmp_path / "perfcore/report/c.py").write_text("import perfcore.report.a_words\n")
    fig = metrics.measure(tmp_path)
    assert fig["report_cycle"][0] == fig["report_cycle"][-1] and len(fig["report_cycle"]) == 4


def test_the_table_names_every_target(tmp_path, capsys):
    assert metrics.main([str(tree(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "render_text lines" in out and "gone" in out and "<= 150,000" in out and "3  <= 4" in out
