"""Health's words: its summary (the verdict's, then the seed method's busy check against its
threshold) and what a heartbeat in the busy series means, made from health.json's figures."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.report.diagnose_words import note_words
from perfcore.report.failure_words import say_script_exit
from perfcore.report.verdict_words import preface, say_verdict

__all__ = ["health_summary", "heartbeat_meaning", "say", "FORWARD_ONLY_NOTE"]

FORWARD_ONLY_NOTE = "a training step, with backward and the optimizer, gains less: perfcore run or diagnose measure it"


def health_summary(doc: Mapping[str, Any]) -> str:
    """The verdict's plain summary (when health decided one), then the busy line."""
    check = doc.get("busy_check") or {}
    threshold = float(check.get("threshold") or 0.6)
    busy = float(doc.get("busy_mean") or 0.0)
    what = "GPU utilisation" if doc.get("busy_source") == "gpu_util" else "compute share of each step (no GPU here)"
    line = f"{what} {100 * busy:.0f}% ({'>=' if busy >= threshold else '<'} {100 * threshold:.0f}%)"
    if check.get("small_work"):
        line += (
            "; low utilisation with no avoidable cause above the threshold: the device's work is small "
            "(short kernels), not blocked"
        )
    decided = bool(check.get("decided", True))
    verdict = (doc.get("verdict") or {}).get("plain_summary") or ""
    return (
        verdict
        + (f" ({FORWARD_ONLY_NOTE})" if check.get("forward_only") else "")
        + (". " if decided else "")
        + f"{line[0].upper()}{line[1:]}"
    )


def heartbeat_meaning(hb: Mapping[str, Any], busy_source: str) -> str:
    """What a period in the busy series means (capture.sampler.heartbeat found it)."""
    unit = "s" if busy_source == "gpu_util" else "s (in steps)"
    return (
        f"utilisation swings between busy and idle every {hb['period_s']:.2f} {unit}: the loader delivers in "
        "bursts (each worker hands over a batch, then all are busy decoding while the device waits); more "
        "workers, a higher prefetch_factor or cheaper batches smooth it"
    )


def say(doc: dict[str, Any]) -> dict[str, Any]:
    """health.json's words beside its facts, in place, as it has always kept them (plain_summary, summary
    after the interference when material, the heartbeat's meaning), for the writer."""
    if isinstance(doc.get("verdict"), dict):
        say_verdict(doc["verdict"])
    say_script_exit(doc)
    if doc.get("note"):
        doc["note"] = note_words(doc["note"])  # health.json has always kept its note in words
    doc["plain_summary"] = health_summary(doc)
    doc["summary"] = preface(doc["plain_summary"], (doc.get("verdict") or {}).get("interference"))
    hb = doc.get("heartbeat")
    if isinstance(hb, dict) and "period_s" in hb:
        hb["meaning"] = heartbeat_meaning(hb, str(doc.get("busy_source")))
    return doc
