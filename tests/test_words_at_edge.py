"""Words are made only in perfcore/report/: analysis/, capture/ and recording/ return facts, statuses and
reason codes. Checked on the source: no string there (its docstrings, exception messages and the messages of
a document it refuses aside) is longer than MAX_WORDS words, so a sentence built there fails here.

Exception messages stay where they are raised: they are error lines for a person, said once by the CLI as they
are (like the reader's ERROR_CALLS), and an exception cannot carry a renderer across the layers. warnings.warn
and logging calls are not let off: their text is most often a note the run also stores (recording/gpu.py warns
with the note it keeps), so it moves to report/ with that note. capture/ and recording/ modules still listed in
NOT_YET build notes as sentences; the last test keeps that list honest.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PERFCORE = Path(__file__).resolve().parents[1] / "perfcore"
ANALYSIS = PERFCORE / "analysis"
# Where facts are made: analysis, and the recording side of a run.
FACTS = [ANALYSIS, PERFCORE / "capture", PERFCORE / "recording"]
# Modules that still build notes as sentences (to be turned into codes and figures said in report/).
NOT_YET = {
    "capture/cupti_python_kinds.py",
    "recording/engine.py",
    "recording/gpu.py",
    "recording/phase_names.py",
}
# A label, a reason code or a unit is a few words; a sentence is more.
MAX_WORDS = 5
# Calls whose argument is an error message (a document refused, said as one line by the reader), or a
# pattern that recognises the words an older document kept (analysis.migrate reads them as codes).
ERROR_CALLS = {"_need", "BadResult", "compile"}
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


def _rel(path: Path) -> str:
    return path.relative_to(PERFCORE).as_posix()


FACT_MODULES = sorted(p for d in FACTS for p in d.glob("*.py"))


@pytest.mark.parametrize("path", [p for p in FACT_MODULES if _rel(p) not in NOT_YET], ids=_rel)
def test_facts_build_no_sentence(path):
    found = long_strings(path.read_text())
    assert not found, f"{_rel(path)} builds words (make a status or reason code; say it in report/): {found[:3]}"


def test_the_modules_not_yet_checked_still_build_sentences():
    """A module that no longer builds a sentence leaves NOT_YET, so the check covers it from then on."""
    clean = [m for m in sorted(NOT_YET) if not long_strings((PERFCORE / m).read_text())]
    assert not clean, f"remove from NOT_YET: {clean}"


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
