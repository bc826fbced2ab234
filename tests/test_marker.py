"""run.parent.marker: a folder's marker read once into a Marker; a value of the wrong kind reads as None, and
a document of another schema is no marker."""
from __future__ import annotations

import json

from perfcore.run.parent.marker import MARKER, MARKER_SCHEMA, Marker, marker_of

MARK = {
    "schema": MARKER_SCHEMA,
    "kind": "run",
    "host": "node0",
    "pid": 4242,
    "started": 99,
    "token": "ab12",
    "job": "j1",
    "created_unix": 1700000000,
    "manifest": {"ino": 5, "ctime_ns": 6},
}


def test_a_marker_reads_its_facts_and_keeps_its_document(tmp_path):
    (tmp_path / MARKER).write_text(json.dumps(MARK))
    m = marker_of(tmp_path)
    assert (m.kind, m.host, m.pid, m.started, m.token, m.job) == ("run", "node0", 4242, 99, "ab12", "j1")
    assert m.created_unix == 1.7e9 and m.manifest == {"ino": 5, "ctime_ns": 6} and m.ended is None
    assert m.doc == MARK  # written back whole when its run fails before a step


def test_a_bad_value_reads_as_none_and_another_document_is_no_marker(tmp_path):
    m = Marker.parse({**MARK, "pid": "4242", "started": True, "token": 7, "created_unix": "now"})
    assert (m.pid, m.started, m.token, m.created_unix) == (None, None, None, None)
    assert m.host == "node0"  # the rest still reads
    assert Marker.parse({**MARK, "schema": "perfcore.run/2"}) is None
    assert Marker.parse(["not", "an", "object"]) is None
    (tmp_path / MARKER).write_text("{")
    assert marker_of(tmp_path) is None
