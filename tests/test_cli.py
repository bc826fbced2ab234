"""The CLI: instant --help (no torch), `perfcore env`, clear one-line errors."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from perfcore.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def test_help_does_not_import_torch():
    code = ("import sys; from perfcore.cli import cli\n"
            "try:\n    cli(['--help'], prog_name='perfcore')\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'pandas', 'numpy', 'perfcore._C') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out
    assert "Commands:" in out


def test_env_json_to_stdout():
    res = CliRunner().invoke(cli, ["env", "--json", "-"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "perfcore.env/1"
    names = {c["name"] for c in doc["checks"]}
    assert {"build", "cpu.load", "ulimit.nofile", "/tmp.free", "torch"} <= names
    assert all(c["status"] in ("ok", "warn", "fail", "info") for c in doc["checks"])
    assert doc["build"]["mode"] in ("cuda", "cpu")
    assert doc["capabilities"]["mode"] == doc["build"]["mode"]
    # Every warning or failure tells the user what to do.
    assert all(c["fix"] for c in doc["checks"] if c["status"] in ("warn", "fail"))


def test_env_writes_json_file(tmp_path):
    out = tmp_path / "env.json"
    res = CliRunner().invoke(cli, ["env", "--json", str(out)])
    assert res.exit_code == 0
    assert json.loads(out.read_text())["summary"]["ok"] >= 1
    assert "mode" in res.output


def test_unwritable_json_path_is_one_line_and_nonzero(tmp_path):
    res = CliRunner().invoke(cli, ["env", "--json", str(tmp_path / "missing" / "env.json")])
    assert res.exit_code != 0
    assert res.output.strip().splitlines() == [
        f"perfcore: error: cannot write JSON to {tmp_path / 'missing' / 'env.json'}: folder {tmp_path / 'missing'} does not exist"]
    assert "Traceback" not in res.output


def test_gpu_check_dry_run_without_gpu_exits_3_in_one_line():
    import perfcore

    if perfcore.capabilities()["features"]["cuda_events"]:
        import pytest

        pytest.skip("a GPU is present: gpu_check would run for real")
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py")], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 3
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check: no GPU")
    assert "Traceback" not in p.stderr + p.stdout


def test_env_gives_cudnn_advice_only_where_a_gpu_runs_the_convolutions(monkeypatch):
    import torch

    from perfcore.capture.environment import check_versions

    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    from perfcore.report.words import check_words

    fixes = {}
    for gpu in (False, True):
        monkeypatch.setattr(torch.cuda, "is_available", lambda gpu=gpu: gpu)
        check = next(c for c in check_versions() if c.name == "cudnn.benchmark")
        assert check.figures == {"on": False, "gpu": gpu}
        fixes[gpu] = check_words(check)[1]
    assert fixes[False] == "" and "cudnn.benchmark = True" in fixes[True]


# What each command writes, as its help must name it (the files its code writes; report.html from
# output.folder_report), and the target forms it takes.
WRITES = {
    "run": ["run.json", "steps.csv", "trace.json", "monitor.csv", "report.html"],
    "monitor": ["monitor.csv", "monitor.png"],
    "health": ["health.json", "report.html"],
    "diagnose": ["diagnose.json", "experiments.png", "report.html", "a run folder per experiment"],
    "sweep": ["sweep.json", "sweep.csv", "report.html", "a run folder per configuration", "dataloader.patch"],
    "demo": ["health.json", "run.json", "diagnose.json", "summary.md", "demo.json", "report.html"],
    "transfer": ["transfer.json", "transfer.csv", "transfer.png"],
    "graph": ["graph.json"],
    "report": ["breakdown.png", "report.html"],
    "compare": ["Writes nothing but what --html and --json name"],
    "merge": ["run.json", "steps.csv", "report.html"],
    "env": ["Writes nothing but what --json names"],
}


def help_of(name: str) -> str:
    res = CliRunner().invoke(cli, [name, "--help"], terminal_width=80)
    assert res.exit_code == 0, res.output
    return res.output


def test_every_command_help_names_its_targets_and_what_it_writes():
    from perfcore.cli import COMMANDS
    from perfcore.workloads import BUILTINS

    assert set(WRITES) == set(COMMANDS)
    for name in COMMANDS:
        text = help_of(name)
        flat = " ".join(text.split())  # the formatter wraps the paragraphs
        missing = [w for w in WRITES[name] if w not in flat]
        assert not missing, f"perfcore {name} --help does not say it writes {missing}:\n{text}"
        assert all(len(line) <= 80 for line in text.splitlines()), f"perfcore {name} --help runs past 80 columns"
    for name in ("health", "diagnose", "sweep", "graph"):
        flat = " ".join(help_of(name).split())
        assert all(b in flat for b in BUILTINS) and "FILE.py:FUNCTION" in flat, name
        assert ("-- python train.py" in flat) == (name != "graph"), name
    for name in ("run", "monitor"):
        assert "COMMAND, after --" in help_of(name)
    sweep = " ".join(help_of("sweep").split())
    assert "never changed" in sweep and "git apply" in sweep
