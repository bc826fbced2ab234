"""diagnose's verdict in words: the verdict as decided, the cause diagnose found loading to be, each
experiment's check and what to do about loading, made from the facts diagnose.json keeps."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.verdict import preface
from perfcore.report.check_words import check_text, loading_text

__all__ = ["diagnose_plain", "say_verdict", "say"]


def diagnose_plain(v: Mapping[str, Any]) -> str:
    """The verdict's sentence with diagnose's findings after it. A verdict written before diagnose kept
    the decided words apart (no decided_summary) is its own plain_summary."""
    base = v.get("decided_summary")
    if not isinstance(base, str):
        return str(v.get("plain_summary") or "")
    if v.get("bound") == "load" and v.get("cause"):
        base = base.replace("input-bound:", f"input-bound ({v['cause']}):", 1)
    said = [check_text(c) for c in v.get("checks") or [] if isinstance(c, Mapping)]
    how = loading_text(v["loading"]) if isinstance(v.get("loading"), Mapping) else ""
    return base + "".join(f". {t[0].upper()}{t[1:]}" for t in said if t) + (f". {how}." if how else ".")


def say_verdict(v: dict[str, Any]) -> dict[str, Any]:
    """The verdict's plain_summary and summary (after the interference, when material) from its facts, in
    place; the same words each time it is said."""
    v["plain_summary"] = diagnose_plain(v)
    v["summary"] = preface(v["plain_summary"], v.get("interference"))
    return v


def say(doc: dict[str, Any]) -> dict[str, Any]:
    """diagnose.json's words beside its facts, in place, as it has always kept them, for the writer."""
    if isinstance(doc.get("verdict"), dict):
        say_verdict(doc["verdict"])
    return doc
