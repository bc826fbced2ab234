"""perfcore's HTML renderer: report.html of a run folder (the page itself is html.run's), the experiment
folders' pages (html.stages), and a folder's report inline in a notebook. Every page is one offline file
(CSS, the chart library and the chart data inline); its pieces are html.parts'. The run page's names are
re-exported here, where callers and users have always imported them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from perfcore.analysis.command_results import DemoResult, DiagnoseResult, HealthResult, SweepResult
from perfcore.analysis.results import Verdict
from perfcore.analysis.run_report import RunReport
from perfcore.report.html.parts import Body, breakdown_svg, esc, links, page, tiles, verdict_card
from perfcore.report.html.run import render_html, render_report, run_sections
from perfcore.report.html.stages import diagnose_sections, health_sections, sweep_sections
from perfcore.report.words import level_word
from perfcore.report.words.verdict import card_words, health_sentence, summary_words

__all__ = [
    "render_html",
    "render_report",
    "write_report",
    "write_folder_report",
    "breakdown_svg",
    "open_report",
    "links",
    "run_sections",
    "stage_page",
]


class _Shown:
    """An HTML body that Jupyter and Colab display inline."""

    def __init__(self, body: str):
        self.body = body

    def _repr_html_(self) -> str:
        return self.body


def open_report(folder: str | Path) -> _Shown:
    """A perfcore folder's report to show inline in a notebook (`open_report("runs/x")` as a cell's last
    line), charts and all, rendered here from the folder's validated documents. The folder's own
    report.html is never shown: a notebook trusts its output, and a folder from elsewhere could hold
    any script there."""
    from perfcore.report.reader import load_run, stage_document

    folder = Path(folder)
    if (folder / "run.json").exists() or (folder / "parts").is_dir():
        doc, steps = load_run(folder)
        return _Shown(render_html(doc, steps))
    found = stage_document(folder)
    if found:
        pass

        name, doc = found
        text = stage_page(folder, f"perfcore {name.split('.')[0]}", doc, "", [])
        start, end = text.find("<div class='perfcore'"), text.rfind("</body>")
        return _Shown(text[start:end])
    return _Shown(render_html(*load_run(folder)))  # says in one line why this is not a run folder


def _atomic_write(path: Path, text: str) -> Path:
    from perfcore import jsonio

    return jsonio.write_text(path, text)


def write_report(folder: Path, r: RunReport, steps: pd.DataFrame | None = None) -> Path:
    """report.html in a run folder (replaced atomically)."""
    folder = Path(folder)
    return _atomic_write(folder / "report.html", render_report(r, steps, folder))


def write_folder_report(folder: Path, title: str, doc: Any, text: str, files: Iterable[str]) -> Path:
    """report.html for demo / health / diagnose / sweep folders: each stage's own sections (the
    terminal text is not repeated), and links to the folder's files."""
    folder = Path(folder)
    files = [x for x in files if x != "report.html"]
    return _atomic_write(folder / "report.html", stage_page(folder, title, doc, text, files))


def _demo(folder: Path, doc: DemoResult, body: Body) -> None:
    from perfcore.report.reader import STEP_COLUMNS, read_csv

    run = doc.run
    body.add(verdict_card(run.verdict, card_words(run.verdict, summary_words(run.verdict))))
    # One decision for the whole demo: the run's attribution checked by diagnose's experiments.
    agree = f"one verdict: {_cause(run.verdict)}, the run's attribution checked by diagnose's experiments"
    body.add(tiles([("demo: names", _cause(run.verdict))]), f"<p><b>{esc(agree)}</b></p>")
    body.add("<div class='stage'><h2>1 · health: is the device busy?</h2>")
    health_sections(doc.health, body, dom_id=None, own_verdict=False)
    body.add("</div><div class='stage'><h2>2 · run: where each training step goes</h2>")
    steps = None
    if (folder / "steps.csv").is_file():
        try:
            steps = read_csv(folder / "steps.csv", STEP_COLUMNS)
        except Exception:  # a damaged table costs the charts, never the report
            steps = None
    # The page's verdict is the card above: the stages' sections leave theirs out, so it is said once.
    run_sections(run, steps, body, dom_id=None, card=False)
    body.add("</div><div class='stage'><h2>3 · diagnose: experiments that test the cause</h2>")
    diagnose_sections(doc.diagnose, body, dom_id=None, card=False)
    body.add("</div>")


def _cause(v: Verdict) -> str:
    if v.named:
        c = v.named[0]
        return f"{c.bound} ({level_word(c.level or v.level)})"
    return "healthy, compute-bound" if v.healthy else str(v.bound or "-")


def _title(doc: Any, text: str) -> str:
    """The page's one sentence: the verdict's, else health's summary, else the terminal report's "best:" line."""
    v = doc.run.verdict if isinstance(doc, DemoResult) else getattr(doc, "verdict", None)
    if isinstance(v, Verdict) and v.decided:
        return summary_words(v)
    if isinstance(doc, HealthResult):
        return health_sentence(doc)
    for line in text.splitlines():
        if line.startswith(("verdict:", "best:")):
            return line.split(":", 1)[1].strip() if line.startswith("verdict:") else line
    return "see the report below"


def stage_page(folder: Path, title: str, doc: Any, text: str, files: list[str]) -> str:
    """report.html of a health, diagnose, sweep or demo folder, from its result."""
    kind = title.replace("perfcore ", "")
    body = Body(kind)
    body.add(f"<h1>{esc(title)}</h1>")
    target = (doc.workload.name if doc.workload else "demo") if isinstance(doc, DemoResult) else doc.workload
    if target:
        body.add(f"<div class='sub'>target: {esc(target)}</div>")
    if isinstance(doc, DemoResult):
        _demo(Path(folder), doc, body)
    elif isinstance(doc, HealthResult):
        health_sections(doc, body)
    elif isinstance(doc, DiagnoseResult):
        diagnose_sections(doc, body)
    elif isinstance(doc, SweepResult):
        sweep_sections(doc, body)
    if files:
        body.add(f"<h2>Files</h2><p>{links(files)}</p>")
    return page(f"perfcore: {_title(doc, text)}", body)
