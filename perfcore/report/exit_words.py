"""How the script ended, in words, from the codes run/parent/outcome records: the exit code, the reason, the
signal that killed it and the OOM killer (the outcome), and the script's own end as its process saw it."""

from __future__ import annotations

import signal

from perfcore.analysis.run_context import Exit, Outcome
from perfcore.analysis.run_report import RunReport

__all__ = ["outcome_sentence", "exit_sentence", "exit_words", "signal_name"]


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def outcome_sentence(oc: Outcome) -> str:
    """The script's end as `perfcore run` saw it: "finished (exit 0)", "was killed by SIGKILL (exit 137)"."""
    rc, reason = oc.code, oc.reason
    if reason == "steps reached":
        return "stopped after the steps asked for (--steps)"
    if rc == 0:
        return "finished (exit 0)"
    if reason == "out of memory":
        return (
            f"was killed by the kernel's out-of-memory killer (SIGKILL, exit {rc}); "
            "lower the batch size or the DataLoader workers' memory"
        )
    if reason == "killed":
        said = f"was killed by {oc.signal} (exit {rc})"
        if oc.signal == signal.SIGKILL.name:
            said += (
                "; SIGKILL is what the kernel's out-of-memory killer sends: if memory was "
                "short (dmesg shows 'Out of memory'), that is the likely cause"
            )
        return said
    if reason == "interrupted":
        return f"was interrupted (Ctrl-C, exit {rc})"
    if reason == "terminated":
        return f"was terminated ({signal_name(rc - 128) if rc is not None and rc > 128 else 'SIGTERM'}, exit {rc})"
    if reason == "crashed":
        return f"crashed (exit {rc})"
    return f"exited with {rc}"


def exit_sentence(ex: Exit, outcome: Outcome | None) -> str:
    """The script's own end as the child saw it, with the code the parent got: "was interrupted
    (Ctrl-C, exit 130)", "crashed (ValueError: bad shape; exit 1)". An empty message says nothing,
    so a bare KeyboardInterrupt reads as Ctrl-C, never "(KeyboardInterrupt: )"."""
    reason, exc = ex.reason or "exited", (ex.exception or "").strip()
    name, _, msg = exc.partition(":")
    msg = msg.strip()
    code = f"exit {outcome.code}" if outcome is not None and outcome.code else ""
    if reason == "interrupted":
        head, detail = "was interrupted", "Ctrl-C" + (f": {msg}" if name == "KeyboardInterrupt" and msg else "")
    elif reason == "terminated":
        head, detail = "was terminated", "SIGTERM"
    elif reason.startswith("killed"):  # a checkpoint's "killed before writing its results"
        head, detail = f"was {reason}", (exc if msg else name)
    else:
        head, detail = reason, (exc if msg else name)
    # "Ctrl-C, exit 130" as the outcome words it; a message and the code apart: "ValueError: x; exit 1".
    inner = (", " if reason in ("interrupted", "terminated") else "; ").join(x for x in (detail, code) if x)
    return f"{head} ({inner})" if inner else head


def exit_words(r: RunReport) -> str:
    """How the script ended, for "partial results: the script ...": its own end with the exit code where
    perfcore run saw it end, else the reason with the exception's first line."""
    ex = r.exit or Exit()
    if r.outcome is not None:
        return exit_sentence(ex, r.outcome)
    return str(ex.reason) + (f" ({' '.join(str(ex.exception).split())})" if ex.exception else "")
