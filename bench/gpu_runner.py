"""How gpu_check runs its checks and reports them (no GPU needed): each check in a child process under a
time limit and the run's budget, rows kept as each check ends (the JSONL rows, the state a second call
on the warm machine resumes from), failing product rows' run folders tarred where they come back, the
table, the summary and the exit status."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterable, Mapping

from gpu_rows import Row

EXIT_PASS, EXIT_FAIL, EXIT_SKIPPED = 0, 1, 2
# A failing product row's folder comes back in one tar under --keep-failed: what the device lets come
# back is 8 files of at most 16 MiB, so the tar stops short of that and leaves big files (a trace) out.
TAR_NAME = "failed_runs.tar"
TAR_MAX_BYTES = 15 << 20
TAR_FILE_MAX_BYTES = 4 << 20


def run_checks(
    checks: Mapping[str, Callable[[], list[Row]]],
    say: Callable[[str], None] = print,
    on_rows: Callable[[str, list[Row]], None] | None = None,
) -> list[Row]:
    rows: list[Row] = []
    for name, fn in checks.items():
        t0 = time.perf_counter()
        try:
            got = fn()
            if not got:
                got = [Row(name, "no result", "a result", False)]
        except Exception as e:  # one check's crash is its FAIL row; the others still run
            got = [Row(name, f"crashed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", "runs", False)]
        if on_rows is not None:
            on_rows(name, got)
        for r in got:
            rows.append(r)
            say(f"  {r.verdict}  {r.check}: {r.measured} (passes: {r.target})")
        say(f"  ({name}: {time.perf_counter() - t0:.1f} s)")
    return rows


def in_child(script: str, name: str, limit: float) -> list[Row]:
    """One check's rows, from `<script> --one NAME` run as a child under `limit` seconds."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rows.json")
        cmd = [sys.executable, script, "--one", name, "--rows-to", out]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            return [Row(name, f"no result within {limit:.0f} s (hung or too slow): ended", "runs", False)]
        if os.path.exists(out):
            with open(out) as fh:
                return [Row(**r) for r in json.load(fh)]
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        return [Row(name, f"process ended with {p.returncode} before its rows: {tail[0]}", "runs", False)]


def row_line(name: str, r: Row, elapsed_s: float) -> str:
    return json.dumps(dict(asdict(r), verdict=r.verdict, check_name=name, elapsed_s=round(elapsed_s, 1)))


def append_lines(path: str | None, lines: Iterable[str]) -> None:
    if not path:
        return
    with open(path, "a") as fh:
        for ln in lines:
            fh.write(ln + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def run_isolated(
    names: Iterable[str],
    child: Callable[[str, float], list[Row]],
    times: Mapping[str, tuple[float, float]],
    say: Callable[[str], None] = print,
    budget_s: float | None = None,
    t0: float | None = None,
    rows_paths: Iterable[str | None] = (),
    keep_failed: str | None = None,
) -> list[Row]:
    """Each check in a process of its own (`child(name, limit)`) under its time limit (times: a check's
    expected seconds and its limit; a check not named there: 15 and 45): a hang or a
    crash of the process (a CUDA fault, a deadlock in a driver call) is that check's FAIL row, and
    the run goes on. A fresh process per check also gives the checks that need one (CUPTI's first use).

    budget_s (from t0, a time.time()): a check expected to take longer than what is left is not
    started (a SKIP row that says so, which decides nothing and passes nothing) and none runs past the
    budget's end. rows_paths: each row is appended to each as one JSON line when its check ends, so a
    run cut short keeps what it decided. keep_failed: a folder where the run folders of failing rows
    are added to one tar as each check ends."""
    t0 = time.time() if t0 is None else t0
    left = lambda: (budget_s - (time.time() - t0)) if budget_s is not None else float("inf")  # noqa: E731
    paths = [p for p in rows_paths if p]

    def one(name: str) -> list[Row]:
        need, limit = times.get(name, (15.0, 45.0))
        if left() < need:
            return [
                Row(
                    name,
                    f"not run: {max(left(), 0):.0f} s of the {budget_s:.0f} s budget left, it takes ~{need:.0f} s",
                    "runs within --budget-s (the rerun command printed first finishes the run)",
                    False,
                    skipped=True,
                )
            ]
        return child(name, min(limit, max(left(), 1.0)))

    def record(name: str, rows: list[Row]) -> None:
        lines = [row_line(name, r, time.time() - t0) for r in rows]
        for p in paths:
            append_lines(p, lines)
        if keep_failed:
            keep_failed_folders(name, rows, Path(keep_failed))

    return run_checks({name: functools.partial(one, name) for name in names}, say=say, on_rows=record)


def keep_failed_folders(name: str, rows: list[Row], dest: Path) -> list[str]:
    """Adds the folders of `rows` that failed to dest/TAR_NAME, under NAME/<folder>/, files of at most
    TAR_FILE_MAX_BYTES and the tar kept under TAR_MAX_BYTES. Returns what it left out, and why."""
    left_out: list[str] = []
    folders = sorted({r.folder for r in rows if r.folder and r.verdict == "FAIL"})
    if not folders:
        return left_out
    dest.mkdir(parents=True, exist_ok=True)
    tar_path = dest / TAR_NAME
    size = tar_path.stat().st_size if tar_path.exists() else 0
    with tarfile.open(tar_path, "a") as tar:
        for folder in folders:
            base = Path(folder)
            for f in sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink()):
                n = f.stat().st_size
                if n > TAR_FILE_MAX_BYTES or size + n + 1024 > TAR_MAX_BYTES:
                    left_out.append(f"{f} ({n} B: over the limit)")
                    continue
                tar.add(f, arcname=f"{name}/{base.name}/{f.relative_to(base)}")
                size += n + 1024
    return left_out


def done_checks(state: str | None) -> tuple[set[str], list[Row]]:
    """The checks a previous call recorded in `state` (its rows JSONL), with their rows: a budget's
    SKIP is not done. Missing or unreadable: nothing done."""
    if not state or not os.path.isfile(state):
        return set(), []
    rows: dict[str, list[Row]] = {}
    for ln in Path(state).read_text().splitlines():
        try:
            d = json.loads(ln)
        except ValueError:
            continue
        if "check_name" not in d or d.get("skipped"):
            continue
        fields = {k: d[k] for k in ("check", "measured", "target", "ok", "decides", "skipped", "folder") if k in d}
        rows.setdefault(d["check_name"], []).append(Row(**fields))
    return set(rows), [r for rs in rows.values() for r in rs]


def table(rows: Iterable[Row]) -> str:
    lines = ["| check | measured | passes when | result |", "|---|---|---|---|"]
    lines += [f"| {r.check} | {r.measured} | {r.target} | {r.verdict} |" for r in rows]
    return "\n".join(lines)


def exit_code(rows: list[Row]) -> int:
    """0 when every deciding row passed; 1 when one failed (or none decided); 2 when none failed but a
    deciding row was skipped: a run cut short by its budget has not passed."""
    deciding = [r for r in rows if r.decides]
    if not deciding or any(r.verdict == "FAIL" for r in deciding):
        return EXIT_FAIL
    return EXIT_SKIPPED if any(r.skipped for r in deciding) else EXIT_PASS


def counts(rows: Iterable[Row]) -> dict[str, int]:
    return dict(Counter(r.verdict for r in rows))
