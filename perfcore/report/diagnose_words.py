"""What a stage's note or a skipped experiment's reason code means, in words."""

from __future__ import annotations

__all__ = ["note_words", "NOTES"]

# What a stage's note or a skipped experiment's reason code means.
NOTES = {
    "script_loop": "a script runs its own loop (optimizer included); health of a workload factory omits the optimizer",
    "no_other_decoder": "the workload declares no other decoder",
    "script_decoders": "a script declares no decoders; use a workload factory with decoders={...} for this experiment",
    "timed_per_batch": "a script's workers are timed per batch (__getitem__ vs collate); for a function-level "
    "profile, point diagnose at a workload factory",
}


def note_words(code: object) -> str:
    """A note or a skip reason in words, from its code."""
    return NOTES.get(str(code), str(code or ""))
