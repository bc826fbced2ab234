"""A run's capture counts said as notes, once: documents carry the counts; the text an older one stored for
them is left to the counts."""

from __future__ import annotations

from run_docs import as_run

from perfcore.analysis.codec import from_doc
from perfcore.analysis.migrate import migrate_run
from perfcore.analysis.run_parts import Capture
from perfcore.report.words.runs import capture_notes, notes_of


def _cap(stats: dict) -> Capture:
    return from_doc(Capture, stats, "capture")


def test_each_kind_of_loss_is_one_note_with_its_counts():
    cap = _cap({"buffers_undecodable": 2, "buffers_incomplete": 1, "bytes_unwalked": 4096, "dropped": 4, "overflow": 1})
    cut, lost = capture_notes(cap)
    assert cut.startswith("2 CUPTI buffer(s)") and "(1 incomplete" in cut and "4096 bytes" in cut
    assert lost.startswith("5 CUPTI records were dropped")
    assert capture_notes(_cap({"dropped": 0, "overflow": 0, "buffers_undecodable": 0})) == []


def test_a_note_an_older_document_stored_as_text_is_not_said_twice():
    cap = {"dropped": 3}
    [said] = capture_notes(_cap(cap))
    old = {"schema": "perfcore.run/1", "notes": ["x", said], "capture": cap}
    assert migrate_run(old)["notes"] == ["x"]
    assert notes_of(as_run({**migrate_run(old), "schema": "perfcore.run/2"})) == ["x", said]
    assert notes_of(as_run({"notes": ["x"]})) == ["x"] and notes_of(as_run({})) == []
