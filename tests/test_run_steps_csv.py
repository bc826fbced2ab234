"""The run's steps.csv is made from the main part's own file where the finish only appended columns (the
monitor's): each of the part's lines joined to the added columns, formatted alone, the same bytes as the whole
table's to_csv, without formatting every figure of every row a second time; anything else is written whole."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfcore.run.parent.part_dirs as part_dirs
from perfcore.analysis.process_part import Part
import perfcore.run.part_files as part_files
from perfcore import jsonio


def _table(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "step": np.arange(n),
            "wall_ms": rng.integers(0, 10**8, n) / 1e6,
            "warmup": np.arange(n) < 3,
            "mem_bytes": np.where(np.arange(n) % 8 == 0, rng.integers(0, 2**40, n), -1),
        }
    )


def _part(tmp_path, table: pd.DataFrame) -> Part:
    d = tmp_path / "parts" / "pid1-0123abcd"
    d.mkdir(parents=True)
    jsonio.write_csv(d / "steps.csv", table)
    return Part.parse({"pid": 1}, table.copy(), {}, dir=d)


def _add_monitor(table: pd.DataFrame, columns: int) -> tuple[str, ...]:
    rng = np.random.default_rng(4)
    names = tuple(f"monitor_c{i}" for i in range(columns))
    for c in names:  # empty where no sample fell in a step, as align_samples leaves it
        table[c] = np.where(rng.random(len(table)) < 0.3, np.nan, rng.random(len(table)) * 100)
    return names


@pytest.mark.parametrize("columns", [1, 3])
def test_added_columns_are_joined_to_the_parts_lines(tmp_path, monkeypatch, columns):
    monkeypatch.setattr(part_files, "CSV_SLICE", 7)  # several slices, the last one short
    part = _part(tmp_path, _table(40))
    added = _add_monitor(part.table, columns)

    def whole(*a, **k):
        raise AssertionError("the whole table was formatted again")

    monkeypatch.setattr(jsonio, "write_csv", whole)
    files: dict[str, str] = {}
    part_dirs.write_steps(part, tmp_path / "steps.csv", files, added=added)
    assert (tmp_path / "steps.csv").read_text() == part.table.to_csv(index=False)


@pytest.mark.parametrize(
    "damage",
    ["header", "fewer rows", "more rows", "quoted", "link", "missing", "not appended"],
)
def test_a_part_file_that_is_not_the_tables_rows_is_written_whole(tmp_path, damage):
    part = _part(tmp_path, _table(20))
    own = part.dir / "steps.csv"
    added = _add_monitor(part.table, 2)
    lines = own.read_text().splitlines(keepends=True)
    if damage == "header":
        own.write_text(lines[0].replace("wall_ms", "wall") + "".join(lines[1:]))
    elif damage == "fewer rows":
        own.write_text("".join(lines[:-1]))
    elif damage == "more rows":
        own.write_text("".join(lines) + lines[-1])
    elif damage == "quoted":
        own.write_text("".join(lines[:5]) + '"1,2",3\n' + "".join(lines[6:]))
    elif damage == "link":
        elsewhere = tmp_path / "elsewhere.csv"
        elsewhere.write_text(lines[0] + "".join(line.replace(",", ",9", 1) for line in lines[1:]))
        own.unlink()
        own.symlink_to(elsewhere)
    elif damage == "missing":
        own.unlink()
    elif damage == "not appended":
        added = added[:1]  # the finish set a column the part's file lacks and did not say so
    part_dirs.write_steps(part, tmp_path / "steps.csv", {}, added=added)
    assert (tmp_path / "steps.csv").read_text() == part.table.to_csv(index=False)


def test_unchanged_rows_are_the_parts_file(tmp_path):
    part = _part(tmp_path, _table(30))
    part_dirs.write_steps(part, tmp_path / "steps.csv", {}, added=())
    assert (tmp_path / "steps.csv").read_bytes() == (part.dir / "steps.csv").read_bytes()
