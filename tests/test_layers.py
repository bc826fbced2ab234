"""The package's imports point one way: cli -> experiments -> run -> timing/workloads -> report -> analysis -> capture -> native."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "perfcore"

# Lower numbers sit lower; a module may import its own layer or any layer below it.
LAYERS = [
    ("perfcore._native", 0), ("perfcore._C", 0), ("perfcore.errors", 0),
    ("perfcore.capture", 1),
    ("perfcore.analysis", 2),
    ("perfcore.report", 3),
    ("perfcore.timing", 4), ("perfcore.workloads", 4),
    ("perfcore.run", 5), ("perfcore.integrations", 5),
    ("perfcore.experiments", 6),
    ("perfcore.cli", 7), ("perfcore.__main__", 7),
]


def layer_of(module: str) -> int | None:
    best = None
    for prefix, rank in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, rank)
    return best[1] if best else None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, imported names) for every import, including those inside functions."""
    tree = ast.parse(path.read_text(), str(path))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [a.name for a in node.names]
            # `from perfcore.x import y` may name a submodule y: judge by the deepest module named.
            for n in names:
                sub = PKG.parent / f"{base}.{n}".replace(".", "/")
                is_module = sub.is_dir() or sub.with_suffix(".py").exists()
                found.append((node.lineno, f"{base}.{n}" if is_module else base, [n]))
    return found


MODULES = sorted(p for p in PKG.rglob("*.py") if p.name != "__init__.py" or p.parent != PKG)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_point_down(path: Path) -> None:
    me = module_name(path)
    mine = layer_of(me)
    if path.parent.name == "_boot":
        return  # the boot file is not a module of the package; it only calls run.instrument
    assert mine is not None, f"{me} is in no layer: add it to LAYERS in {Path(__file__).name}"
    climbs = []
    for line, target, _ in imports_of(path):
        if not target.startswith("perfcore"):
            continue
        theirs = layer_of(target)
        if theirs is not None and theirs > mine:
            climbs.append(f"{path.relative_to(PKG.parent)}:{line} imports {target} (a higher layer)")
    assert not climbs, "\n".join(climbs)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_private_names_across_modules(path: Path) -> None:
    me = module_name(path)
    reaches = []
    for line, target, names in imports_of(path):
        if not target.startswith("perfcore") or target == me:
            continue
        for n in names:
            if n.startswith("_") and not n.startswith("__") and n not in ("_C", "_native"):
                reaches.append(f"{path.relative_to(PKG.parent)}:{line} takes {n} from {target}")
    assert not reaches, "\n".join(reaches)


def test_every_layer_exists() -> None:
    for prefix, _ in LAYERS:
        rel = prefix.replace(".", "/")
        if prefix == "perfcore._C":
            continue
        assert (PKG.parent / rel).is_dir() or (PKG.parent / f"{rel}.py").exists(), prefix
