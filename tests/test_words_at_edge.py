"""Words are made only in perfcore/report/: analysis/ returns facts, statuses and reason codes. Checked on
the source: no string in analysis/ (its docstrings, exception messages and the messages of a document it
refuses aside) is longer than MAX_WORDS words, so a sentence built there fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ANALYSIS = Path(__file__).resolve().parents[1] / "perfcore" / "analysis"
# A label, a reason code or a unit is a few words; a sentence is more.
MAX_WORDS = 5
# Calls whose argument is an error message (a document refused, said as one line by the reader).
ERROR_CALLS = {"_need", "BadResult"}
# Not words for a person: unified diff syntax.
NOT_WORDS = {"\n\\ No newline at end of file\n"}


def _text(node: ast.AST) -> str:
    """A string constant, or an f-string with each field as one word."""
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{x}" for v in node.values)
    return node.value


def long_strings(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))  # a docstring
        name = getattr(getattr(node, "func", None), "id", None) or getattr(getattr(node, "func", None), "attr", None)
        if isinstance(node, ast.Raise) or (isinstance(node, ast.Call) and name in ERROR_CALLS):
            skip.update(id(n) for n in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            text = _text(node)
            skip.update(id(n) for n in ast.walk(node))  # an f-string's pieces are counted with it
            if len(text.split()) > MAX_WORDS and text not in NOT_WORDS:
                found.append((node.lineno, text))
    return found


@pytest.mark.parametrize("path", sorted(ANALYSIS.glob("*.py")), ids=lambda p: p.name)
def test_analysis_builds_no_sentence(path):
    found = long_strings(path.read_text())
    assert not found, f"{path.name} builds words (make a status or reason code; say it in report/): {found[:3]}"


def test_the_check_finds_a_sentence_and_leaves_docstrings_and_errors_alone():
    src = '''
"""A module docstring of many, many words that says what it does."""
def f(x):
    """A docstring of many, many words here."""
    _need(x, "the verdict's checks are not a list")
    if x:
        raise ValueError(f"a message of many words about {x} here")
    return {"status": "faster", "text": f"up to {x} faster than the run before"}
'''
    assert long_strings(src) == [(8, "up to {x} faster than the run before")]
