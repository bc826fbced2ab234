"""diagnose's verdict in words: the verdict as decided with diagnose's findings (the cause loading was
found to be, each experiment's check, what to do about loading), made from the facts diagnose.json keeps
by report.verdict_words, as every verdict is said."""

from __future__ import annotations

from typing import Any

from perfcore.report.verdict_words import say_verdict

__all__ = ["say", "say_verdict"]


def say(doc: dict[str, Any]) -> dict[str, Any]:
    """diagnose.json's words beside its facts, in place, as it has always kept them, for the writer. A
    verdict written before the facts were kept keeps the words it stored."""
    if isinstance(doc.get("verdict"), dict):
        say_verdict(doc["verdict"])
    return doc
