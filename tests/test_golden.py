"""The golden corpus (tests/golden/): every folder real perfcore commands made renders as it was locked, through
`perfcore report` (short and --explain), report.html's text, perfcore.summary(), the demo's summary.md,
`perfcore compare` and `perfcore merge`. A deliberate change is locked with `python scripts/golden.py update`
and listed by its committer; scripts/golden.py check prints the same diffs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("golden", Path(__file__).resolve().parent.parent / "scripts" / "golden.py")
golden = importlib.util.module_from_spec(_SPEC)
sys.modules["golden"] = golden
_SPEC.loader.exec_module(golden)


@pytest.fixture(scope="module")
def rendered():
    """Every case rendered once, in-process (one CliRunner per command)."""
    return golden.render_all()


@pytest.mark.parametrize("name", golden.case_names())
def test_renders_as_locked(rendered, name):
    assert golden.locked(name), f"nothing locked for {name}: run python scripts/golden.py update"
    found = golden.diffs(name, rendered[name])
    assert not found, (
        f"{name} renders differently from tests/golden/expected/{name}/ (a deliberate change: "
        "python scripts/golden.py update, and list it):\n" + "\n".join(found)
    )


def test_every_case_has_its_folder_and_nothing_else_is_locked():
    made = {p.name for p in golden.RUNS.iterdir() if p.is_dir()}
    assert made == {c.name for c in golden.CASES}
    assert {p.name for p in golden.EXPECTED.iterdir()} == set(golden.case_names())


def test_the_readme_says_how_each_folder_was_made():
    assert golden.cases_table() in golden.README.read_text()


def test_the_corpus_stays_small():
    size = sum(p.stat().st_size for p in golden.GOLDEN.rglob("*") if p.is_file())
    assert size < 8 * 2**20, f"tests/golden/ holds {size / 2**20:.1f} MiB"


def test_normalise_replaces_only_what_varies(tmp_path):
    from perfcore import __version__

    text = f"more: {tmp_path}/r/report.html\nwritten by perfcore at 2031-01-02 03:04:05\nstep 12.5 ms"
    assert golden.normalise(text, tmp_path) == "more: <TMP>/r/report.html\nwritten by perfcore at <TIME>\nstep 12.5 ms"
    if __version__:
        assert golden.normalise(f"perfcore {__version__} build", tmp_path) == "perfcore <VERSION> build"


def test_a_page_reads_as_its_visible_text():
    page = (
        "<html><head><title>t &amp; u</title><style>p{color:red}</style></head><body><h1>Run</h1>"
        "<div><b>23.9 ms</b><span>avoidable</span></div><script>var x = '<p>no</p>';</script>"
        "<table><tr><th>label</th><th>ms</th></tr><tr><td>load</td><td>4.1</td></tr></table>"
        "<pre>a  b\nc</pre><p>one<br>two</p></body></html>"
    )
    assert golden.visible_text(page) == "title: t & u\nRun\n23.9 ms avoidable\nlabel | ms\nload | 4.1\na  b\nc\none\ntwo\n"
