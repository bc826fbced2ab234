"""The CLI's frame: commands loaded only when used (help never imports torch), `python -m perfcore`,
bare `perfcore`, PERFCORE_DEBUG's values, and --json targets that cannot take the result."""
from __future__ import annotations

import inspect
import json
import os
import stat
import subprocess
import sys
import threading

import click
import pytest
from click.testing import CliRunner

from perfcore.cli import COMMANDS, cli

# Runs the CLI in a fresh interpreter, then reports which heavy and which command modules it imported.
PROBE = """import json, sys
from perfcore.cli import cli
try:
    cli(sys.argv[1:], prog_name="perfcore")
except SystemExit as e:
    code = e.code
mods = [m for m in sys.modules if m.split(".")[0] in ("torch", "pandas", "numpy", "matplotlib")
        or m == "perfcore._C" or m.startswith("perfcore.cli.")]
print("\\nPROBE " + json.dumps({"code": code, "modules": sorted(mods)}))
"""


def probe(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.rsplit("PROBE ", 1)[1])


def test_top_help_imports_no_command_module_and_nothing_heavy():
    got = probe("--help")
    assert got["code"] == 0
    assert got["modules"] == ["perfcore.cli.group"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_help_imports_only_its_own_module(name):
    got = probe(name, "--help")
    assert got["code"] == 0
    assert not [m for m in got["modules"] if m.split(".")[0] in ("torch", "pandas", "numpy", "matplotlib")
                or m == "perfcore._C"], got["modules"]
    shared = {"perfcore.cli.group", "perfcore.cli.types", "perfcore.cli.output", "perfcore.cli.shared"}
    assert [m for m in got["modules"] if m.startswith("perfcore.cli.")] == sorted(shared | {COMMANDS[name][0]})


def test_every_listed_command_resolves_and_the_list_matches_the_commands_own_help():
    lazy_help = CliRunner().invoke(cli, ["--help"]).output
    names = [line.split()[0] for line in lazy_help.split("Commands:\n", 1)[1].splitlines() if line.strip()]
    assert names == sorted(COMMANDS)
    ctx = click.Context(cli, info_name="perfcore")
    for name in names:
        cmd = cli.get_command(ctx, name)
        assert isinstance(cmd, click.Command) and cmd.name == name
        module, attr, _ = COMMANDS[name]
        assert getattr(__import__(module, fromlist=[attr]), attr) is cmd
        assert COMMANDS[name][2] == " ".join(inspect.cleandoc(cmd.help).split("\n\n")[0].split())
    # The list written from the table is the one click writes from the loaded commands' own help.
    lazy, loaded = ctx.make_formatter(), ctx.make_formatter()
    cli.format_commands(ctx, lazy)
    click.Group.format_commands(cli, ctx, loaded)
    assert lazy.getvalue() == loaded.getvalue()
    assert "Commands:" in lazy.getvalue()


def test_an_unknown_command_is_a_usage_line():
    res = CliRunner().invoke(cli, ["rnu"], prog_name="perfcore")
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "perfcore: error: No such command 'rnu'. Did you mean 'run'? (see 'perfcore --help')"]


def run_cli(args, **kw):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, **kw)


@pytest.mark.parametrize("args, code", [(["--help"], 0), (["--version"], 0), (["report", "/nonexistent/run"], 2),
                                        (["compare", "--fail-above", "nan", ".", "."], 2)])
def test_python_dash_m_perfcore_is_the_perfcore_command(args, code):
    entry = run_cli(["-c", "import sys; from perfcore.cli import main; sys.argv[0] = 'perfcore'; main()", *args])
    for module in ("perfcore", "perfcore.cli"):
        p = run_cli(["-m", module, *args])
        assert p.returncode == entry.returncode == code, (module, p.stderr)
        assert (p.stdout, p.stderr) == (entry.stdout, entry.stderr)


def test_python_dash_m_perfcore_mirrors_a_failing_commands_exit_code(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nsys.exit(7)\n")
    p = run_cli(["-m", "perfcore", "monitor", "--quiet", "--out", str(tmp_path / "m"), "--", sys.executable,
                 str(script)])
    assert p.returncode == 7, p.stderr


def test_bare_perfcore_prints_the_usual_help():
    p = run_cli(["-m", "perfcore"])
    assert p.returncode in (0, 2)
    text = p.stdout + p.stderr
    lines = text.splitlines()
    assert lines[0] == "Usage: perfcore [OPTIONS] COMMAND [ARGS]..."
    assert "Commands:" in lines and "error" not in text
    assert any(line.split()[:1] == ["run"] for line in lines)


@pytest.mark.parametrize("value, shown", [("0", False), ("false", False), ("No", False), ("off", False),
                                          ("", False), (" ", False), ("1", True), ("true", True),
                                          ("YES", True), ("on", True)])
def test_perfcore_debug_values(tmp_path, value, shown):
    res = CliRunner().invoke(cli, ["env", "--json", str(tmp_path / "missing" / "e.json")],
                             env={"PERFCORE_DEBUG": value})
    assert res.exit_code == 2
    assert ("Traceback (most recent call last)" in res.output) is shown
    assert res.output.strip().splitlines()[-1].startswith("perfcore: error: cannot write JSON to ")


def test_json_into_a_missing_folder_is_a_usage_error(tmp_path):
    target = tmp_path / "missing" / "r.json"
    res = CliRunner().invoke(cli, ["compare", "--json", str(target), str(tmp_path), str(tmp_path)])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        f"perfcore: error: cannot write JSON to {target}: folder {target.parent} does not exist"]
    assert not target.parent.exists()


@pytest.mark.skipif(not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode),
                    reason="no /dev/full device here")
def test_json_to_dev_full_fails_in_one_line_and_leaves_the_device():
    p = run_cli(["-m", "perfcore", "env", "--quiet", "--json", "/dev/full"])
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == ["perfcore: error: cannot write JSON to /dev/full: No space left on device"]
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # written into, never replaced by a file


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("args", [["env", "--json", "-"], ["env"], ["--help"]])
def test_a_full_stdout_is_a_failure_in_one_line(args):
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "perfcore", *args], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    assert p.returncode == 1
    assert p.stderr.strip().splitlines()[-1:] == ["perfcore: error: No space left on device"]
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr


def test_json_into_a_pipe_is_written_into_it(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    res = CliRunner().invoke(cli, ["env", "--json", str(fifo)])
    reader.join(timeout=60)
    assert res.exit_code == 0, res.output
    assert json.loads(got[0])["schema"] == "perfcore.env/1"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left beside it


def test_the_wrote_line_fits_the_width_and_counts_what_it_leaves_out():
    from perfcore.cli.output import wrote_line

    files = ["run.json", "steps.csv", "monitor.csv", "monitor.png", "steps.parquet", "trace.json", "breakdown.png",
             "ranks.png", "report.html"]
    line = wrote_line("/tmp/trial/run_hw/", files)
    assert len(line) <= 100 and line.startswith("wrote /tmp/trial/run_hw/: run.json, steps.csv")
    shown = line.split(": ", 1)[1].split(", and ")[0].split(", ")
    more = int(line.rsplit(", and ", 1)[1].split()[0])
    assert shown == files[: len(shown)] and len(shown) + more == len(files)
    assert wrote_line("/r/", files[:3]) == "wrote /r/: run.json, steps.csv, monitor.csv"
    # Only the folder's own path runs past the width: one file is always named.
    long = wrote_line("/" + "x" * 130 + "/", files)
    assert long.split(": ", 1)[1].startswith("run.json, and 8 more")
