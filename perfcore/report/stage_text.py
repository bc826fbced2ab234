"""A triage folder's own report in the terminal: a demo's (all three stages), health's, diagnose's or
sweep's, read back from its validated document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfcore.report.demo_words import render_demo
from perfcore.report.experiments import (
    render_demo_brief,
    render_diagnose,
    render_diagnose_brief,
    render_health,
    render_sweep,
)

__all__ = ["stage_text"]


def stage_text(folder: Path, explain: bool = False) -> tuple[Any, str, str] | None:
    """(the command's result, terminal text, stage name) of a demo, health, diagnose or sweep folder, read from
    its validated document (a demo folder's demo.json before its stages' documents); None when the folder holds
    none of them."""
    from perfcore.report.reader import stage_document

    renders = {
        "demo.json": render_demo if explain else (lambda d: render_demo_brief(d, folder)),
        "health.json": render_health,
        "diagnose.json": render_diagnose if explain else render_diagnose_brief,
        "sweep.json": render_sweep,
    }
    found = stage_document(folder, tuple(renders))
    if found is None:
        return None
    name, doc = found
    return doc, renders[name](doc), name.split(".")[0]
