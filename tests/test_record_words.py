"""A run's capture counts said as notes, once: new documents carry the counts, older ones the text."""

from __future__ import annotations

from perfcore.report.record_words import capture_notes, notes_of


def test_each_kind_of_loss_is_one_note_with_its_counts():
    cap = {"buffers_undecodable": 2, "buffers_incomplete": 1, "bytes_unwalked": 4096, "dropped": 4, "overflow": 1}
    cut, lost = capture_notes(cap)
    assert cut.startswith("2 CUPTI buffer(s)") and "(1 incomplete" in cut and "4096 bytes" in cut
    assert lost.startswith("5 CUPTI records were dropped")
    assert capture_notes({"dropped": 0, "overflow": 0, "buffers_undecodable": 0}) == []


def test_a_note_an_older_document_stored_as_text_is_not_said_twice():
    cap = {"dropped": 3}
    [said] = capture_notes(cap)
    assert notes_of({"notes": ["x", said], "capture": cap}) == ["x", said]
    assert notes_of({"notes": ["x"], "capture": cap}) == ["x", said]
    assert notes_of({"capture": "not a table"}) == [] and notes_of({}) == []
