"""The report on a terminal: long lines wrap to its width under their own indent; piped output keeps a
fact to a line. Read through a real pseudo-terminal, as a user's shell gives perfcore one."""
from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

from perfcore.cli.output import wrap_lines

GOLDEN = Path(__file__).parent / "golden"


def _explain_text() -> str:
    return (GOLDEN / "expected" / "input_workers0" / "explain.txt").read_text()


def test_wrapped_lines_fit_keep_every_word_and_hang_under_their_indent():
    text = _explain_text()
    assert max(map(len, text.splitlines())) > 300  # the --explain paragraphs this is for
    got = wrap_lines(text, 80)
    assert got.split() == text.split()  # nothing lost, nothing reordered
    for line in got.splitlines():
        assert len(line) <= 80 or " " not in line.strip(), line
    src = text.splitlines()
    short = [s for s in src if len(s) <= 80]
    assert all(s in got.splitlines() for s in short)  # what fits is left as it is
    bullet = next(s for s in src if s.startswith("  - ") and len(s) > 80)
    out = got.splitlines()
    at = next(i for i, o in enumerate(out) if o.startswith("  - ") and bullet.startswith(o))
    assert out[at + 1].startswith("    ") and out[at + 1][4] != " "  # two past the bullet's own indent


def test_a_figure_stays_beside_its_unit():
    line = "x" * 20 + " 216 ms " + "y" * 20
    for width in range(21, 40):
        got = wrap_lines(line, width).splitlines()
        assert not any(piece.endswith("216") for piece in got), got
        assert any("216 ms" in piece for piece in got), got


def test_a_command_to_paste_is_never_broken():
    for cmd in ("perfcore report /tmp/runs/run-1 --explain", "git apply '/tmp/my runs/sweep/dataloader.patch'",
                "perfcore diagnose workload_factories.py:slow_loader"):
        line = f"more: /tmp/runs/run-1/report.html; all evidence: {cmd}"
        for width in range(30, len(line)):
            got = [piece.strip() for piece in wrap_lines(line, width).splitlines()]
            assert any(cmd in piece for piece in got), (width, got)
    # The sentence after a command still wraps.
    said = "  perfcore report --explain names the lines of your loop that hold this time, each with its share"
    assert len(wrap_lines(said, 40).splitlines()) > 2


def test_a_word_longer_than_the_width_stays_whole():
    path = "/very/long/" + "x" * 120 + "/report.html"
    got = wrap_lines(f"more: {path} and the rest of the line", 60)
    assert path in [line.strip() for line in got.splitlines()]


def _report(folder: Path, tty: bool) -> str:
    cmd = [sys.executable, "-m", "perfcore", "report", str(folder), "--explain"]
    env = {**os.environ, "COLUMNS": "80", "LINES": "24"}
    if not tty:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=True).stdout
    leader, follower = pty.openpty()
    try:
        p = subprocess.Popen(cmd, stdout=follower, stderr=subprocess.DEVNULL, env=env)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the follower side closed: the process is done writing
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert p.wait(timeout=120) == 0
    finally:
        os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_the_explain_report_wraps_on_a_terminal_and_not_in_a_pipe(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(GOLDEN / "runs" / "input_workers0", folder)  # report rewrites its breakdown.png
    piped, shown = _report(folder, tty=False), _report(folder, tty=True)
    assert max(map(len, piped.splitlines())) > 300
    assert shown.split() == piped.split()
    assert all(len(line) <= 80 or " " not in line.strip() for line in shown.splitlines())
