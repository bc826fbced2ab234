"""The public API is what the docs say: every name in `perfcore.__all__`, and every `perfcore.X`
that the README, the --help texts and the error messages name, works after a bare
`import perfcore`, and that import stays light (no torch, numpy or pandas)."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

import perfcore
from perfcore.cli import cli

ROOT = Path(__file__).resolve().parents[1]
# perfcore.X.Y as a name, not a schema id (perfcore.run/1) nor part of a longer word or path.
REF = re.compile(r"(?<![\w/.-])perfcore\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?![\w/-])")
# Calls whose string arguments reach the user as an error.
ERROR_CALL = re.compile(r"(Error|Exception|Unavailable|Failed|BadParameter|fail|die)$")


def refs(text: str) -> set[str]:
    return {m.group(1).rstrip(".") for m in REF.finditer(text)}


def resolve(names) -> dict[str, str | None]:
    """name -> None if `perfcore.<name>` works after a bare import in a fresh Python, else the error.

    The first part must be an attribute of the package; deeper parts may be submodules."""
    code = f"""
import importlib, json, sys
import perfcore
out = {{}}
for name in {sorted(names)!r}:
    obj, parts = perfcore, name.split(".")
    try:
        for i, part in enumerate(parts):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                if i == 0:
                    raise
                obj = importlib.import_module("perfcore." + ".".join(parts[: i + 1]))
        out[name] = None
    except Exception as e:
        out[name] = f"{{type(e).__name__}}: {{e}}"
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def help_texts() -> str:
    runner, texts = CliRunner(), []

    def walk(cmd: click.Command, path: list[str]) -> None:
        r = runner.invoke(cli, path + ["--help"])
        assert r.exit_code == 0, r.output
        texts.append(r.output)
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, path + [name])

    walk(cli, [])
    return "\n".join(texts)


def error_message_refs() -> dict[str, str]:
    """perfcore.X in string constants raised, or passed to an error-making call, -> where."""
    found: dict[str, str] = {}
    for f in sorted((ROOT / "perfcore").rglob("*.py")):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None:
                target = node.exc
            elif isinstance(node, ast.Call):
                fn = node.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                if not ERROR_CALL.search(name):
                    continue
                target = node
            else:
                continue
            for c in ast.walk(target):
                if isinstance(c, ast.Constant) and isinstance(c.value, str):
                    for r in refs(c.value):
                        found.setdefault(r, f"{f.relative_to(ROOT)}:{c.lineno}")
    return found


def test_all_names_resolve_after_bare_import():
    assert {"StepTimer", "Workload", "transfer", "graphs"} <= set(perfcore.__all__)
    bad = {k: v for k, v in resolve(set(perfcore.__all__)).items() if v}
    assert not bad, bad


def test_documented_api_names_work():
    # The three the issue was about, and the documented calls on them.
    names = {"StepTimer", "Workload", "transfer.measure", "graphs", "workloads.Workload", "summary"}
    bad = {k: v for k, v in resolve(names).items() if v}
    assert not bad, bad


def test_readme_names_resolve():
    names = refs((ROOT / "README.md").read_text())
    assert "StepTimer" in names  # the README's own loop example
    bad = {k: v for k, v in resolve(names).items() if v}
    assert not bad, f"README names perfcore attributes that do not exist: {bad}"


def test_help_text_names_resolve():
    names = refs(help_texts())
    bad = {k: v for k, v in resolve(names).items() if v}
    assert not bad, f"--help names perfcore attributes that do not exist: {bad}"


def test_error_message_names_resolve():
    found = error_message_refs()
    assert "Workload" in found  # the workload-factory error tells users to return perfcore.Workload(...)
    bad = {f"{k} ({found[k]})": v for k, v in resolve(set(found)).items() if v}
    assert not bad, f"error messages name perfcore attributes that do not exist: {bad}"


def test_import_perfcore_stays_light():
    code = ("import sys, perfcore; perfcore.__version__; perfcore.build_info(); "
            "print([m for m in ('torch', 'numpy', 'pandas', 'perfcore._C') if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", f"import perfcore loaded {r.stdout.strip()}"


def test_unknown_name_is_an_attribute_error():
    r = resolve({"no_such_thing", "__wrapped__"})
    assert r["no_such_thing"].startswith("AttributeError") and r["__wrapped__"].startswith("AttributeError")
