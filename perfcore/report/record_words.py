"""The notes a run's capture facts call for (records lost, buffers cut short), in words, for every output
that lists a run's notes. A document from an earlier version stored them as text: they are not said twice."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["capture_notes", "notes_of"]


def capture_notes(cap: Mapping[str, Any]) -> list[str]:
    """What the capture's counts mean for the numbers: one line per kind of loss."""
    out = []
    undecodable = int(cap.get("buffers_undecodable") or 0)
    if undecodable:
        out.append(
            f"{undecodable} CUPTI buffer(s) ended at a record CUPTI would not return "
            f"({int(cap.get('buffers_incomplete') or 0)} incomplete: work still running at stop); up to "
            f"{int(cap.get('bytes_unwalked') or 0)} bytes of records after them are lost"
        )
    lost = int(cap.get("dropped") or 0) + int(cap.get("overflow") or 0)
    if lost:
        out.append(
            f"{lost} CUPTI records were dropped (buffers full or drained too slowly): kernel "
            "and copy times are undercounted; see capture in run.json"
        )
    return out


def notes_of(doc: Mapping[str, Any]) -> list[str]:
    """The run's notes as stored, then those its capture facts call for that are not among them."""
    stored = [str(n) for n in doc.get("notes") or []]
    cap = doc.get("capture")
    said = capture_notes(cap) if isinstance(cap, Mapping) else []
    return stored + [n for n in said if n not in stored]
