"""Statuses into words for the terminal's short report: the verdict in one line, each piece of advice as
one "try" line, from the numbers and statuses the decision holds. The long words (every interval, the
evidence, the caveats) stay in the documents' sentences, which `--explain` and report.html show."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.results import Level, Verdict
from perfcore.analysis.units import fmt_band, fmt_ms, fmt_share, fmt_x
from perfcore.analysis.verdict import WARN_SHARE

__all__ = ["verdict_short", "try_short", "WHAT"]

# What each avoidable label's time is, in a few words.
WHAT = {"load": "waiting for data", "transfer": "copies", "comm": "collectives", "host": "host gaps"}
# What each piece of advice changes, in a few words, by its id; the full text says how and why.
_CHANGE = {
    "pin_memory": "pin_memory=True, and .to(device, non_blocking=True)",
    "more_workers": "more DataLoader workers (num_workers)",
    "cheaper_batches": "cheaper batches (less work per item, data cached as tensors)",
    "pageable_despite_pin": "pin the tensor copied from pageable memory (pin_memory is set)",
    "persistent_workers": "persistent_workers=True (workers start once, not every epoch)",
    "fewer_workers": "fewer workers: the hand-over from workers costs more than it hides",
    "deeper_prefetch": "a higher prefetch_factor",
    "overlap_copies": "overlap copies with compute (pinned memory, non_blocking, prefetch the next batch)",
    "overlap_comm": "overlap communication with backward, or send less",
    "launch_overhead": "remove syncs (.item(), .cpu()) from the loop; torch.compile or CUDA Graphs",
    "host_gaps": "look at the loop's code between steps (py-spy top shows which lines)",
    "untimed_host_work": "time the rest of the step with timer.phase('name')",
    "faster_compute": "faster compute (bf16 autocast, torch.compile, fused optimizers)",
    "startup": "measure a longer run (--steps) before judging the steady state",
    "evaluation": "evaluate less often, or on a subset under torch.inference_mode()",
    "balance_ranks": "even out the slow rank's work (the others wait for it)",
}


# A cheaper batch, by how the loader's items are made: a decoder is named only where images are decoded.
_CHEAPER = {
    "pil": "cheaper batches (decode_jpeg, not PIL; pre-resized or cached images)",
    "fast": "cheaper batches (pre-resized or cached images)",
    "none": "cheaper batches (transforms once on the whole tensor, batch indexing)",
}


def _change(rec: Mapping[str, Any]) -> str | None:
    rid = str(rec.get("id"))
    if isinstance(rec.get("set"), Mapping) and rec["set"]:  # the settings themselves, with their numbers
        return "set " + ", ".join(f"{k}={v}" for k, v in rec["set"].items())
    if rid == "set_num_threads":
        return f"torch.set_num_threads({rec.get('threads_fit', 1)}): threads spin on oversubscribed cores"
    if rid == "faster_compute" and isinstance(rec.get("ways"), list) and rec["ways"]:
        return "faster compute: " + ", ".join(str(w) for w in rec["ways"])  # the advice's own ways, as it lists them
    if rid == "evaluation" and isinstance(rec.get("share_of_wall"), (int, float)):
        return f"evaluation took {fmt_share(rec['share_of_wall'])} of the run: evaluate less often, on fewer batches"
    if rid == "cheaper_batches" and rec.get("decode") in _CHEAPER:
        return _CHEAPER[rec["decode"]]
    return _CHANGE.get(rid)


def _gain(speedup: float | None, band: Any) -> str:
    if speedup is None:
        return ""
    b = fmt_band(*band) if band and band[0] is not None and band[1] is not None and band[0] != band[1] else ""
    return f"up to {fmt_x(speedup)} faster" + (f" ({b})" if b else "")


def verdict_short(v: Mapping[str, Any]) -> str:
    """The verdict in one line: the bound and its level, what the time is, its ms and share of the step
    (with the interval), and what removing it gains. Marked when a measured busy machine makes it
    uncertain."""
    if v.get("bound") in (None, "unknown") or not v.get("step_ms"):
        return f"verdict: {v.get('summary') or 'no steps measured'}"
    t = Verdict.from_dict(v)
    busy = " [uncertain: busy]" if t.uncertain else ""  # the header line says how busy, as measured
    over = v.get("oversubscribed")
    if isinstance(over, Mapping) and over.get("threads"):
        busy += f" [{over['threads']} threads on {float(over.get('free_cores') or 0):.1f} free cores]"
    if t.level is Level.HEALTHY:
        big = t.ranked[0] if t.ranked and t.ranked[0].ms_per_step > 0 else None
        tail = f" (largest: {WHAT[big.label]}, {fmt_share(big.share)})" if big else ""
        return (
            f"verdict: compute-bound (healthy): no avoidable cause reaches {100 * WARN_SHARE:.0f}% of the "
            f"{fmt_ms(t.step_ms)} step{tail}{busy}"
        )
    job = v.get("straggler") if isinstance(v.get("straggler"), Mapping) else None
    # A job held up by one rank: the wait, the slow rank and the label of its excess, each once.
    wait = (
        f"; rank {job.get('waiting_rank')} waits {fmt_share(float(job.get('wait_share') or 0))} for it" if job else ""
    )
    if job and t.bound == "straggler":
        return (
            f"verdict: straggler rank {job.get('slow_rank')} ({t.level.value}): rank {job.get('waiting_rank')} "
            f"waits {fmt_ms(float(job.get('wait_ms') or 0))} of a {fmt_ms(float(job.get('step_ms') or 0))} step "
            f"({fmt_share(float(job.get('wait_share') or 0))}) for it, {job.get('excess_label')} "
            f"+{fmt_ms(float(job.get('excess_ms') or 0))}{busy}"
        )
    top = next((c for c in t.named if c.label == t.primary), None)
    if top is None:  # a document without the verdict's numbers (written before they were kept)
        return f"verdict: {v.get('plain_summary') or v.get('summary') or ''}"
    # The interval gives way to the wait for the slow rank, which the line must also hold.
    band = f", CI {fmt_band(top.share_band[0], top.share_band[1], fmt_share)}" if top.share_band and not job else ""
    level = "borderline" if t.level is Level.BORDERLINE else top.level.value
    # The gain of removing it is said once, on the "try" line that names the change.
    on = f" on rank {job.get('slow_rank')}" if job else ""  # the slow rank's steps, not the table's rank
    return (
        f"verdict: {top.bound}{on} ({level}): {WHAT[top.label]}, {fmt_ms(top.ms_per_step)} of a "
        f"{fmt_ms(t.step_ms)} step ({fmt_share(top.share)}{band}){wait}{busy}"
    )


def try_short(rec: Mapping[str, Any], verdict: Mapping[str, Any], site: str | None) -> str:
    """One piece of advice as a "try" line: where in the user's code, the change, its expected gain."""
    change = _change(rec)
    if change is None:  # a finding with its own words (memory): its first clause
        change = str(rec.get("text") or "").split(": ")[0].split(". ")[0]
    # The advice's own gain (what the free cores allow of a wait, say); a document written before advice
    # kept one: its cause's.
    cause = next((c for c in verdict.get("causes") or [] if c.get("label") == rec.get("cause")), None)
    g = rec.get("gain") if isinstance(rec.get("gain"), Mapping) else (cause or {}).get("expected_gain") or {}
    gain = _gain(g.get("speedup"), g.get("band")) if rec.get("cause") in WHAT else ""
    where = f"{site}: " if site and rec.get("cause") in ("load", "transfer") else ""
    return f"try: {where}{change}" + (f": {gain}" if gain else "")
