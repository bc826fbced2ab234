"""The run's notes in words: the notes finishing a run records as codes with figures, the notes the
recording and the instrumented process word themselves, and those the capture's counts call for (records
lost, buffers cut short), for every output that lists a run's notes."""

from __future__ import annotations

from perfcore.analysis.run_context import Note
from perfcore.analysis.run_parts import Capture
from perfcore.analysis.run_report import RunReport

__all__ = ["capture_notes", "notes_of", "note_words"]


def capture_notes(cap: Capture) -> list[str]:
    """What the capture's counts mean for the numbers: one line per kind of loss."""
    out = []
    undecodable = cap.count("buffers_undecodable")
    if undecodable:
        out.append(
            f"{undecodable} CUPTI buffer(s) ended at a record CUPTI would not return "
            f"({cap.count('buffers_incomplete')} incomplete: work still running at stop); up to "
            f"{cap.count('bytes_unwalked')} bytes of records after them are lost"
        )
    lost = cap.count("dropped") + cap.count("overflow")
    if lost:
        out.append(
            f"{lost} CUPTI records were dropped (buffers full or drained too slowly): kernel "
            "and copy times are undercounted; see capture in run.json"
        )
    return out


def note_words(n: Note) -> str:
    """One note in words: its own text, or its code's words from its figures."""
    f = n.figures
    if n.code == "evaluation_only":
        return (
            ", ".join(f"pid {p}" for p in f.get("pids") or [])
            + " stepped no optimizer while other processes trained (evaluation only): not in the steps"
        )
    if n.code == "measured_apart":
        procs = f.get("processes") or []
        return (
            f"{len(procs)} other Python process(es) the script started ("
            + ", ".join(f"pid {p.get('pid')}: {p.get('steps', 0)} steps" for p in procs)
            + ") were measured apart: not ranks of this run, not merged into it"
        )
    if n.code == "from_checkpoint":
        return (
            "the process ended without writing its results (killed?): these are its last checkpoint's, "
            f"{f.get('steps')} settled steps"
        )
    if n.code == "finished_afterwards":
        return (
            "finished afterwards by `perfcore report` from the parts its processes wrote: perfcore stopped before "
            f"it saw the script end, so the exit code {f.get('exit_code')} is the one the results imply"
        )
    return n.text or n.code


def notes_of(r: RunReport) -> list[str]:
    """The run's notes, then those its capture facts call for."""
    return [note_words(n) for n in r.notes] + (capture_notes(r.capture) if r.capture is not None else [])
