"""diagnose.json's words beside its facts: the verdict as every verdict is said (report.verdict_words,
with diagnose's checks and loading cause), and a script that failed after measured steps."""

from __future__ import annotations

from typing import Any

from perfcore.report.failure_words import say_script_exit
from perfcore.report.verdict_words import say_verdict

__all__ = ["say", "note_words", "NOTES"]

# What a stage's note or a skipped experiment's reason code means (an older document stored the words).
NOTES = {
    "script_loop": "a script runs its own loop (optimizer included); health of a workload factory omits the optimizer",
    "no_other_decoder": "the workload declares no other decoder",
    "script_decoders": "a script declares no decoders; use a workload factory with decoders={...} for this experiment",
    "timed_per_batch": "a script's workers are timed per batch (__getitem__ vs collate); for a function-level "
    "profile, point diagnose at a workload factory",
}


def note_words(code: object) -> str:
    """A note or a skip reason in words: its code's, else the words an older document stored."""
    return NOTES.get(str(code), str(code or ""))


def say(doc: dict[str, Any]) -> dict[str, Any]:
    """diagnose.json's words beside its facts, in place, as it has always kept them, for the writer. A
    verdict written before the facts were kept keeps the words it stored."""
    if isinstance(doc.get("verdict"), dict):
        say_verdict(doc["verdict"])
    return say_script_exit(doc)
