"""A run folder is untrusted input: names in its documents never become paths, a planted link never
redirects a write, nothing outside the folder is written or deleted, a live run is left alone, and
what is shown (terminal, HTML, notebook) cannot carry an escape sequence or a script. Each defect
has its own test; test_catalogue runs every hostile folder class through report, compare, merge
and open_report with a sentinel folder beside it that must not change."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfcore.cli import cli
from perfcore.report import jsonio

from run_docs import write_run_folder


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="perfcore")


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root (links not followed): kind, size, mtime, content."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_file():
                out[str(p)] = ("file", st.st_size, st.st_mtime_ns, p.read_bytes())
            else:
                out[str(p)] = ("dir",)
    return out


def sentinel(tmp_path: Path) -> Path:
    """Files a hostile folder aims at: a results table, a checkpoint, a page."""
    s = tmp_path / "sentinel"
    (s / "data").mkdir(parents=True)
    (s / "data" / "results.csv").write_text("mine,1\n")
    (s / "victim.txt").write_text("do not touch\n")
    part = write_run_folder(s / "part")
    (part / "checkpoint").mkdir()
    jsonio.write(part / "checkpoint" / "run.json", json.loads((part / "run.json").read_text()))
    return s


def unfinished(out: Path, ranks=(None,), **kw) -> Path:
    """A run folder perfcore was stopped before finishing: parts only, no run.json."""
    for i, rank in enumerate(ranks):
        key = f"rank{rank}" if isinstance(rank, int) else f"pid{4242 + i}"
        part = write_run_folder(out / "parts" / key, **kw)
        doc = json.loads((part / "run.json").read_text())
        doc.update(rank=rank, pid=4242 + i, world_size=len(ranks) if rank is not None else None)
        jsonio.write(part / "run.json", doc)
    return out


def set_part(out: Path, key: str, **fields) -> None:
    path = out / "parts" / key / "run.json"
    doc = json.loads(path.read_text())
    doc.update(fields)
    path.write_text(json.dumps(doc))


# ---- names from a document never become paths


def test_a_rank_that_is_a_path_is_refused_and_writes_nothing_outside(tmp_path):
    s = sentinel(tmp_path)
    before = snapshot(s)
    out = unfinished(tmp_path / "r", ranks=(0, 1))
    # The part's rank walks out of the folder to sentinel/data/results(.csv); an empty steps_rankX/
    # made the path resolve before the fix.
    set_part(out, "rank1", rank=f"X/../../{s.name}/data/results")
    (out / "steps_rankX").mkdir()
    res = invoke("report", out)
    assert res.exit_code == 1, res.output
    (line,) = res.stderr.strip().splitlines()
    assert "rank1/run.json: is corrupt: part.rank is text, not a number" in line
    assert snapshot(s) == before


@pytest.mark.parametrize("field", ["pid", "world_size", "nested_in"])
def test_every_naming_field_of_a_part_is_checked(tmp_path, field):
    out = unfinished(tmp_path / "r", ranks=(0,))
    set_part(out, "rank0", **{field: "../../x"})
    res = invoke("report", out)
    assert res.exit_code == 1 and f"part.{field} is text, not a number" in res.stderr, res.output


def test_a_part_folder_named_otherwise_is_skipped(tmp_path):
    out = unfinished(tmp_path / "r")
    (out / "parts" / "pid4242").rename(out / "parts" / "evil\x1b]0;x\x07")
    res = invoke("report", out)
    assert res.exit_code == 2 and "not a perfcore run folder" in res.stderr
    assert "\x1b" not in res.stderr and "\x07" not in res.stderr
    assert "skipping" in res.stderr


def test_a_rank_that_is_a_float_integer_still_names_its_table(tmp_path):
    out = unfinished(tmp_path / "r", ranks=(0, 1))
    set_part(out, "rank1", rank=1.0)
    res = invoke("report", out)
    assert res.exit_code == 0, res.output
    assert (out / "steps_rank1.csv").is_file() and not (out / "steps_rank1.0.csv").exists()


# ---- writes never follow a link, and never leave the folder


OUTPUTS = ("run.json.tmp", "steps.csv", "steps.parquet", "report.html", "breakdown.png", "steps_rank0.csv",
           "steps_rank1.csv", "ranks.png")


def test_a_planted_link_at_every_output_is_replaced_not_followed(tmp_path):
    s = sentinel(tmp_path)
    before = snapshot(s)
    out = unfinished(tmp_path / "r", ranks=(0, 1))
    for name in OUTPUTS:
        (out / name).symlink_to(s / "victim.txt")
    res = invoke("report", out)
    assert res.exit_code == 0, res.output
    assert snapshot(s) == before
    for name in ("steps.csv", "steps.parquet", "report.html", "breakdown.png", "steps_rank0.csv", "ranks.png"):
        assert not (out / name).is_symlink() and (out / name).is_file(), name
    assert (out / "run.json.tmp").is_symlink()  # not perfcore's: left as it is


def test_the_atomic_writer_never_writes_through_a_planted_temporary_name(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    monkeypatch.setattr(jsonio.secrets, "token_hex", lambda n: "same")
    tmp_name = tmp_path / f".out.{os.getpid()}-same.tmp.json"
    tmp_name.symlink_to(victim)
    with pytest.raises(Exception):
        jsonio.write(tmp_path / "out.json", {"a": 1})
    assert victim.read_text() == "keep" and tmp_name.is_symlink() and not (tmp_path / "out.json").exists()


def test_a_linked_part_is_not_followed_and_its_checkpoint_survives(tmp_path):
    s = sentinel(tmp_path)
    before = snapshot(s)
    out = tmp_path / "r"
    (out / "parts").mkdir(parents=True)
    (out / "parts" / "rank0").symlink_to(s / "part")
    res = invoke("report", out)
    assert res.exit_code == 2 and "not a perfcore run folder" in res.stderr, res.output
    assert snapshot(s) == before and (s / "part" / "checkpoint" / "run.json").is_file()


def test_a_linked_parts_folder_is_not_followed(tmp_path):
    s = sentinel(tmp_path)
    (s / "parts").mkdir()
    (s / "parts" / "rank0").symlink_to(s / "part")
    before = snapshot(s)
    out = tmp_path / "r"
    out.mkdir()
    (out / "parts").symlink_to(s / "parts")
    res = invoke("report", out)
    assert res.exit_code == 2 and "not a perfcore run folder" in res.stderr, res.output
    assert snapshot(s) == before


def test_a_linked_checkpoint_is_neither_read_nor_deleted(tmp_path):
    s = sentinel(tmp_path)
    before = snapshot(s)
    out = unfinished(tmp_path / "r")
    (out / "parts" / "pid4242" / "checkpoint").symlink_to(s / "part" / "checkpoint")
    res = invoke("report", out)
    assert res.exit_code == 0, res.output
    assert snapshot(s) == before and (out / "parts" / "pid4242" / "checkpoint").is_symlink()
