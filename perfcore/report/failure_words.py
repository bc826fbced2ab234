"""What failed, in words: a script that failed after measured steps (health's and diagnose's
script_exit) and a sweep configuration with no numbers of its own, each from its facts (a reason code,
the exit code, the run document's own words for its exit). An older document kept only its words."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["script_exit_words", "config_failure", "say_script_exit"]

# Diagnose's runs, as a failure names them.
_WHERE = {"baseline": " in the baseline", "synthetic": " with synthetic data", "workers": " with"}


def _steps(n: Any) -> str:
    n = int(n or 0)
    return f"{n} measured step{'' if n == 1 else 's'}"


def _how(ended: Any, code: Any) -> str:
    """How the script ended: its run document's words, else its exit code."""
    return str(ended) if ended else f"exited with {code}"


def script_exit_words(ex: Mapping[str, Any]) -> str:
    """ "the script crashed (...; exit 1) after 12 measured steps in the baseline: these results are
    partial"; an older document's stored sentence."""
    if "how" not in ex and "steps" not in ex:
        return str(ex.get("sentence") or "")
    where = _WHERE.get(str(ex.get("run")), "")
    if where == " with":
        where += " " + ", ".join(f"{k}={v}" for k, v in (ex.get("settings") or {}).items())
    return f"the script {_how(ex.get('how'), ex.get('code'))} after {_steps(ex.get('steps'))}{where}: these results are partial"


def say_script_exit(doc: dict[str, Any]) -> dict[str, Any]:
    """A stage document's script_exit with its sentence beside its facts, in place, for the writer."""
    ex = doc.get("script_exit")
    if isinstance(ex, dict):
        ex["sentence"] = script_exit_words(ex)
    return doc


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
