"""Paths as users type them: `~` left unexpanded by the shell (after `=`, in quotes) means the home
folder in every command that takes a path, and parts, reader and finisher agree on the folder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = str(Path(__file__).resolve().parent / "scripts" / "exits.py")


def perfcore(*args, cwd, home):
    env = dict(os.environ, HOME=str(home))
    return subprocess.run([sys.executable, "-m", "perfcore.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=180)


def test_tilde_after_equals_is_the_home_folder_in_run_report_and_json(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    p = perfcore("run", "--warmup", "1", "--out=~/r", "--json=~/r.json", "--", sys.executable, SCRIPT,
                 cwd=cwd, home=home)
    assert p.returncode == 0, p.stderr
    assert json.loads((home / "r" / "run.json").read_text())["steps"] == 7
    assert json.loads((home / "r.json").read_text())["steps"] == 7
    assert not (cwd / "~").exists()
    rep = perfcore("report", "~/r", "--json=~/again.json", cwd=cwd, home=home)
    assert rep.returncode == 0, rep.stderr
    assert (home / "again.json").is_file()
    merged = perfcore("merge", "~/r", "--out=~/m", cwd=cwd, home=home)
    assert merged.returncode == 0, merged.stderr
    assert (home / "m" / "run.json").is_file() and not (cwd / "~").exists()


def _run_bytes(*args, cwd):
    """A command whose arguments may hold bytes that are not UTF-8 (as str, surrogate-escaped), its output as bytes."""
    return subprocess.run([sys.executable, "-m", "perfcore.cli", *map(str, args)], capture_output=True, cwd=cwd,
                          timeout=300)


def test_arguments_and_paths_that_are_not_utf8_are_kept_and_the_run_is_written(tmp_path):
    """`perfcore run -- python tr\\xfe.py $'\\xff'` into --out o\\xfa: the script's exit code, a run folder,
    every byte kept in every document (JSON's escape of Python's surrogate escape reads back as the byte),
    and `perfcore report` on the folder, HTML included."""
    folder = tmp_path / os.fsdecode(b"d\xff")
    folder.mkdir()
    script = folder / os.fsdecode(b"tr\xfe.py")
    script.write_bytes(Path(SCRIPT).read_bytes())
    out = tmp_path / os.fsdecode(b"o\xfa")
    p = _run_bytes("run", "--warmup", "1", "--out", out, "--", sys.executable, script, "sys_exit", "3",
                   os.fsdecode(b"\xff"), cwd=tmp_path)
    assert p.returncode == 3, p.stderr.decode(errors="replace")
    assert b"internal error" not in p.stderr and b"Traceback" not in p.stderr
    doc = json.loads((out / "run.json").read_text())
    assert [os.fsencode(a) for a in doc["command"][1:]] == [os.fsencode(str(script)), b"sys_exit", b"3", b"\xff"]
    assert doc["steps"] + doc["warmup_steps"] == 8 and doc["exit_code"] == 3
    for f in out.rglob("*.json"):
        f.read_bytes().decode("utf-8")  # every document is still text: its escapes keep the bytes
    rep = _run_bytes("report", out, "--html", "--explain", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr.decode(errors="replace")
    rep.stdout.decode("utf-8")  # printable: a byte that is not UTF-8 is shown as its escape
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "\\xff" in page and "\\udcff" not in page


def test_run_prints_a_hostile_folder_and_script_name_without_their_controls(tmp_path):
    """--out and a script whose names carry a terminal title sequence, a screen clear, a right-to-left override
    and a byte that is not UTF-8: `perfcore run`'s report on stderr (its "more:" line names the folder, its
    "try:" lines the script's file) shows none of the controls and the byte as its escape, as `perfcore
    report` does. It set the terminal's title and reversed the line."""
    name = os.fsdecode(b"ev\x1b]0;owned\x07il\x1b[2J\xe2\x80\xaegnp\xff")
    script = tmp_path / f"{name}.py"
    script.write_bytes(Path(SCRIPT).read_bytes())
    p = _run_bytes("run", "--warmup", "1", "--out", tmp_path / name, "--", sys.executable, script, "sys_exit", "3",
                   cwd=tmp_path)
    assert p.returncode == 3, p.stderr.decode(errors="replace")
    err = p.stderr.decode("utf-8")
    # The name is shown without its sequences, its byte as the escape the documents' readers show.
    assert "evilgnp\\xff/report.html" in err.split("more: ")[1] and "\\udcff" not in err
    assert [c for c in err if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"] == []


def test_sweep_prints_a_hostile_script_name_without_its_controls(tmp_path):
    """The sweep's table starts with its command: a script name's sequences and override are not printed."""
    name = os.fsdecode(b"sw\x1b]0;owned\x07ee\xe2\x80\xaep")
    script = tmp_path / f"{name}.py"
    script.write_bytes((Path(SCRIPT).parent / "loader_settings.py").read_bytes())
    p = _run_bytes("sweep", "--batch-size", "8", "--num-workers", "0", "--pin-memory", "false", "--steps", "3",
                   "--warmup", "1", "--out", tmp_path / "s", "--", sys.executable, script, cwd=tmp_path)
    shown = p.stdout.decode("utf-8") + p.stderr.decode("utf-8")
    assert "sweep of " in shown and "sweep.py" in shown, shown
    assert [c for c in shown if (ord(c) < 32 and c not in "\n\t\r") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"] == []
