"""diagnose.json's words beside its facts: the verdict as every verdict is said (report.verdict_words,
with diagnose's checks and loading cause), and a script that failed after measured steps."""

from __future__ import annotations

from typing import Any

from perfcore.report.failure_words import say_script_exit
from perfcore.report.verdict_words import say_verdict

__all__ = ["say"]


def say(doc: dict[str, Any]) -> dict[str, Any]:
    """diagnose.json's words beside its facts, in place, as it has always kept them, for the writer. A
    verdict written before the facts were kept keeps the words it stored."""
    if isinstance(doc.get("verdict"), dict):
        say_verdict(doc["verdict"])
    return say_script_exit(doc)
