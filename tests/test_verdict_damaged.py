"""The verdict on a document it did not type (a part, an older run.json) never raises: a damaged value of the
evidence reads as absent, as the typed reader reads it, and an undamaged document is judged as before."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from perfcore.analysis.results import Verdict
from perfcore.analysis.verdict import decide_run

RUNS = sorted((Path(__file__).parent / "golden" / "runs").glob("*/run.json"))
EVIDENCE = ("step_time_ms", "step_ms", "breakdown_ms", "breakdown_robust", "device", "steps", "startup", "interference")
BAD = (None, "x", True, -1, math.nan, math.inf, [], {}, [1, "a"], {"mean": "x"})


def _paths(doc: dict) -> list[tuple[str, ...]]:
    """Every place in the evidence's fields, one level into each object (where its figures are)."""
    out = []
    for key in EVIDENCE:
        out.append((key,))
        if isinstance(doc.get(key), dict):
            out += [(key, sub) for sub in doc[key]]
    return out


def _set(doc: dict, path: tuple[str, ...], value) -> dict:
    d = copy.deepcopy(doc)
    target = d
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value
    return d


@pytest.mark.parametrize("run_json", RUNS, ids=lambda p: p.parent.name)
def test_a_damaged_value_never_raises_and_the_whole_document_decides_as_read(run_json):
    doc = json.loads(run_json.read_text())
    whole = decide_run(doc)
    assert isinstance(whole, Verdict)
    assert decide_run(copy.deepcopy(doc)) == whole  # reading does not change the document or the answer
    tried = 0
    for path in _paths(doc):
        for value in BAD:
            got = decide_run(_set(doc, path, value))
            assert isinstance(got, Verdict), (path, value)
            assert got.step_ms is None or math.isfinite(got.step_ms), (path, value, got.step_ms)
            tried += 1
    assert tried >= len(EVIDENCE) * len(BAD)
