"""The terminal report read at a glance: line budgets, each fact once, no line over 120 characters but a
path, the same decision as the document. Built on documents real perfcore commands wrote."""
from __future__ import annotations

import json
from pathlib import Path

from perfcore.report.experiments import render_demo_brief, render_diagnose_brief
from perfcore.report.terminal import render_brief, render_text

DOCS = Path(__file__).with_name("report_docs")


def doc_of(name: str) -> dict:
    return json.loads((DOCS / name).read_text())


def _fits(text: str, most: int) -> list[str]:
    lines = text.splitlines()
    assert len(lines) <= most, text
    for line in lines:  # a long line is one that names a path (a run folder, the user's file)
        assert len(line) <= 120 or "/" in line, line
    return lines


def test_run_brief_is_a_header_the_table_one_verdict_and_two_tries():
    doc = doc_of("run.json")
    lines = _fits(render_brief(doc, "runs/r1"), 15)
    assert lines[0].startswith(f"perfcore: {doc['steps']} steps") and "p50" in lines[0] and "p90" in lines[0]
    assert [ln.split()[0] for ln in lines[2:7]] == ["load", "transfer", "compute", "comm", "host"]
    assert sum(ln.startswith("verdict:") for ln in lines) == 1 and "input-bound (critical)" in lines[7]
    tries = [ln for ln in lines if ln.startswith("try:")]
    assert 1 <= len(tries) <= 2 and tries[0].startswith("try: train_small.py:30: more DataLoader workers")
    assert lines[-1] == "more: runs/r1/report.html; all evidence: perfcore report runs/r1 --explain"
    # --explain keeps every piece of evidence the short report leaves out.
    full = render_text(doc)
    assert len(full.splitlines()) > len(lines) and "evidence:" in full and "steps counted at" in full


def test_diagnose_and_demo_briefs_fit_their_budgets():
    d = doc_of("diagnose.json")
    lines = _fits(render_diagnose_brief(d, "runs/d/report.html; all evidence: --explain"), 20)
    assert sum(ln.startswith("verdict:") for ln in lines) == 1
    # A check from before statuses were kept: its status read from `agrees`, as its own sentence says it.
    (said,) = [ln.split(": ")[-1].split(",")[0] for ln in lines if ln.startswith("  synthetic")]
    assert f"predicted: {said}" in d["verdict"]["checks"][0]["sentence"]
    demo = dict(doc_of("demo.json"), health=doc_of("health.json"), run=doc_of("demo_run.json"), diagnose=d)
    lines = _fits(render_demo_brief(demo, "runs/demo"), 30)
    assert sum(ln.startswith("verdict:") for ln in lines) == 1
    assert lines[0].startswith("health:") and lines[1].startswith("run:") and lines[-1].startswith("demo finished")
