"""perfcore's HTML renderer: report.html of a run folder (the page itself is html.run's), the experiment
folders' pages (html.stages), and a folder's report inline in a notebook. Every page is one offline file
(CSS, the chart library and the chart data inline); its pieces are html.parts'. The run page's names are
re-exported here, where callers and users have always imported them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from perfcore.analysis.run_report import RunReport
from perfcore.report.html.run import breakdown_svg, links, render_html, render_report, run_sections

__all__ = [
    "render_html",
    "render_report",
    "write_report",
    "write_folder_report",
    "breakdown_svg",
    "open_report",
    "links",
    "run_sections",
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
        from perfcore.report.html.stages import stage_page

        name, doc = found
        text = stage_page(folder, f"perfcore {name.split('.')[0]}", doc, "", [])
        start, end = text.find("<div class='perfcore'"), text.rfind("</body>")
        return _Shown(text[start:end])
    return _Shown(render_html(*load_run(folder)))  # says in one line why this is not a run folder


def _atomic_write(path: Path, text: str) -> Path:
    from perfcore.report import jsonio

    return jsonio.write_text(path, text)


def write_report(folder: Path, r: RunReport, steps: pd.DataFrame | None = None) -> Path:
    """report.html in a run folder (replaced atomically)."""
    folder = Path(folder)
    return _atomic_write(folder / "report.html", render_report(r, steps, folder))


def write_folder_report(folder: Path, title: str, doc: Any, text: str, files: Iterable[str]) -> Path:
    """report.html for demo / health / diagnose / sweep folders: each stage's own sections (the
    terminal text is not repeated), and links to the folder's files."""
    from perfcore.report.html.stages import stage_page

    folder = Path(folder)
    files = [x for x in files if x != "report.html"]
    return _atomic_write(folder / "report.html", stage_page(folder, title, doc, text, files))
