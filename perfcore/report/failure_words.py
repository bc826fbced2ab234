"""What failed, in words: a script that failed after measured steps (health's and diagnose's
script_exit) and a sweep configuration with no numbers of its own, each from its facts (a reason code,
the exit code, how the script's run ended)."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.command_results import ScriptExit
from perfcore.report.exit_words import exit_sentence, outcome_sentence

__all__ = ["script_exit_words", "config_failure"]

# Diagnose's runs, as a failure names them.
_WHERE = {"baseline": " in the baseline", "synthetic": " with synthetic data", "workers": " with"}


def _steps(n: Any) -> str:
    n = int(n or 0)
    return f"{n} measured step{'' if n == 1 else 's'}"


def _how(ended: Any, code: Any) -> str:
    """How the script ended: its run document's words, else its exit code."""
    return str(ended) if ended else f"exited with {code}"


def script_exit_words(ex: ScriptExit) -> str:
    """ "the script crashed (...; exit 1) after 12 measured steps in the baseline: these results are
    partial"."""
    where = _WHERE.get(str(ex.run), "")
    if where == " with":
        where += " " + ", ".join(f"{k}={v}" for k, v in (ex.settings or {}).items())
    how = (
        exit_sentence(ex.exit, ex.outcome)
        if ex.exit is not None and ex.outcome is not None
        else outcome_sentence(ex.outcome)
        if ex.outcome is not None
        else None
    )
    return f"the script {_how(how, ex.code)} after {_steps(ex.steps)}{where}: these results are partial"


def config_failure(row: Mapping[str, Any]) -> str:
    """Why a sweep configuration has no numbers of its own (or only partial ones), from its reason; the
    exception's own message where it had one; an older row's stored text."""
    row = {k: v for k, v in dict(row).items() if not (isinstance(v, float) and v != v)}  # a table's NaN: none
    if isinstance(row.get("exit_code"), float):
        row["exit_code"] = int(row["exit_code"])
    reason = row.get("reason")
    if reason == "no_measured_step":
        if row.get("ended"):
            return f"the script {row['ended']} during warm-up: no measured step"
        if row.get("exit_code") is not None:
            return f"the script ended (exit {row['exit_code']}) during warm-up: no measured step"
        return "the run ended in warm-up: no measured step"
    if reason == "failed_partway":
        how = _how(row.get("ended"), row.get("exit_code"))
        return f"the script {how} after {_steps(row.get('steps'))}: these results are partial"
    if reason == "out_of_memory" and not row.get("error"):
        return "out of memory"
    return str(row.get("error") or "")
