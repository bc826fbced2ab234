"""Health's words: its summary (the verdict's, then the seed method's busy check against its
threshold) and what a heartbeat in the busy series means, made from health's figures."""

from __future__ import annotations

from perfcore.analysis.command_results import HealthResult, Heartbeat
from perfcore.report.verdict_words import plain_words

__all__ = ["health_summary", "heartbeat_meaning", "FORWARD_ONLY_NOTE"]

FORWARD_ONLY_NOTE = "a training step, with backward and the optimizer, gains less: perfcore run or diagnose measure it"


def health_summary(doc: HealthResult) -> str:
    """The verdict's plain summary (when health decided one), then the busy line."""
    check = doc.busy_check
    threshold = float(check.threshold or 0.6)
    busy = float(doc.busy_mean or 0.0)
    what = "GPU utilisation" if doc.busy_source == "gpu_util" else "compute share of each step (no GPU here)"
    line = f"{what} {100 * busy:.0f}% ({'>=' if busy >= threshold else '<'} {100 * threshold:.0f}%)"
    if check.small_work:
        line += (
            "; low utilisation with no avoidable cause above the threshold: the device's work is small "
            "(short kernels), not blocked"
        )
    verdict = plain_words(doc.verdict) if doc.verdict is not None and doc.verdict.decided else ""
    return (
        verdict
        + (f" ({FORWARD_ONLY_NOTE})" if check.forward_only else "")
        + (". " if check.decided else "")
        + f"{line[0].upper()}{line[1:]}"
    )


def heartbeat_meaning(hb: Heartbeat, busy_source: str) -> str:
    """What a period in the busy series means (capture.sampler.heartbeat found it)."""
    unit = "s" if busy_source == "gpu_util" else "s (in steps)"
    return (
        f"utilisation swings between busy and idle every {hb.period_s:.2f} {unit}: the loader delivers in "
        "bursts (each worker hands over a batch, then all are busy decoding while the device waits); more "
        "workers, a higher prefetch_factor or cheaper batches smooth it"
    )
