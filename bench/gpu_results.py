"""bench/RESULTS.md's GPU tables, made from the device runs' rows kept in bench/gpu_runs/.

    python bench/gpu_results.py           # rewrites every table between its markers
    python bench/gpu_results.py --check   # exit 1, naming each, where a table differs from its rows

In RESULTS.md a run's table sits between two markers that name its rows file:

    <!-- gpu_run: 2026-12-04-h200-run1 -->
    (the table, made from bench/gpu_runs/2026-12-04-h200-run1.rows.jsonl)
    <!-- /gpu_run -->

A rows file is what `gpu_check.py --rows` writes on the device: a header line {"header": {date, commit,
device, stack, ...}} and one JSON row a line. To keep a new run: copy its rows.jsonl (both calls', one
after the other, where the rerun command finished it) and its last call's gpu.json here as
<date>-<device>-<what>.rows.jsonl and .json, put the two markers where its table goes, run this.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_rows beside this file
from gpu_rows import Row  # noqa: E402

ROW_FIELDS = tuple(f.name for f in fields(Row))
HERE = Path(__file__).resolve().parent
RUNS = HERE / "gpu_runs"
RESULTS = HERE / "RESULTS.md"
BLOCK = re.compile(r"(<!-- gpu_run: (?P<name>[A-Za-z0-9._-]+) -->\n)(?P<body>.*?)(<!-- /gpu_run -->)", re.S)
STACK = ("device", "torch", "cupti_version", "python", "driver", "commit")


def load(name: str, runs: Path = RUNS) -> tuple[dict, list[dict]]:
    """A run's header and rows from runs/<name>.rows.jsonl (lines that are neither are left out). A run
    finished by a second call (--resume) keeps both calls' rows files one after the other: the first
    header is the run's."""
    header: dict = {}
    rows = []
    for ln in (runs / f"{name}.rows.jsonl").read_text().splitlines():
        d = json.loads(ln)
        if "header" in d:
            header = header or d["header"]
        elif "check" in d:
            rows.append(d)
    return header, rows


def verdict(row: dict) -> str:
    """The row's verdict, as gpu_rows.Row says it from the row's fields."""
    return Row(**{k: row[k] for k in ROW_FIELDS if k in row}).verdict


def render(name: str, runs: Path = RUNS) -> str:
    """The block's body: one line naming the rows and the stack, then the table."""
    header, rows = load(name, runs)
    counts: dict[str, int] = {}
    for r in rows:
        counts[verdict(r)] = counts.get(verdict(r), 0) + 1
    stack = ", ".join(f"{k} {header[k]}" for k in STACK if header.get(k) is not None)
    said = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    lines = [f"Rows: `bench/gpu_runs/{name}.rows.jsonl` ({stack}; {said}).", ""]
    if header.get("recovered"):
        lines[0] = lines[0][:-1] + f"; {header['recovered']}."
    lines += ["| check | measured | passes when | result |", "|---|---|---|---|"]
    lines += [f"| {r['check']} | {r['measured']} | {r['target']} | {verdict(r)} |" for r in rows]
    return "\n".join(lines) + "\n"


def refresh(text: str, runs: Path = RUNS) -> str:
    """text with every marked table made again from its rows."""
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("name"), runs) + m.group(4), text)


def stale(text: str, runs: Path = RUNS) -> list[str]:
    """The runs whose table in text differs from what their rows make."""
    return [m.group("name") for m in BLOCK.finditer(text) if m.group("body") != render(m.group("name"), runs)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 where a table is stale")
    args = ap.parse_args(argv)
    text = RESULTS.read_text()
    if args.check:
        bad = stale(text)
        for name in bad:
            print(
                f"gpu_results: the table of {name} in {RESULTS.name} is not what its rows make; run "
                "python bench/gpu_results.py",
                file=sys.stderr,
            )
        return 1 if bad else 0
    new = refresh(text)
    if new != text:
        RESULTS.write_text(new)
    print(f"gpu_results: {len(BLOCK.findall(text))} tables in {RESULTS.name} made from {RUNS.name}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
