"""The package's imports point one way: cli -> experiments -> run/integrations -> timing/workloads -> recording
-> report -> analysis -> capture -> native; inside run/, parent and child meet only in run.protocol."""
from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "perfcore"

# Lower numbers sit lower; a module may import its own layer or any layer below it.
LAYERS = [
    ("perfcore._native", 0), ("perfcore._C", 0), ("perfcore.errors", 0), ("perfcore._lazy", 0), ("perfcore.untrusted", 0),
    ("perfcore.jsonio", 0), ("perfcore.safe_text", 0), ("perfcore.shapes", 0),
    ("perfcore.capture", 1),
    ("perfcore.analysis", 2),
    ("perfcore.report", 3),
    ("perfcore.recording", 4),
    ("perfcore.timing", 5), ("perfcore.workloads", 5),
    ("perfcore.run", 6), ("perfcore.integrations", 6),
    ("perfcore.experiments", 7),
    ("perfcore.cli", 8), ("perfcore.__main__", 8),
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



# -- no import cycle ---------------------------------------------------------------------------------
# Function-level imports count as much as module-level ones: a deferred import hides a cycle from the
# interpreter (nothing fails at import time), not from the design, where the two modules still cannot
# be read, tested or moved apart. Every cycle the package once had ran through a deferred import.
# Cycles still open, each inside a room another engineer owns; the list only shrinks.
KNOWN_CYCLES: list[set[str]] = []


def import_graph(paths: list[Path]) -> dict[str, set[str]]:
    """module -> the perfcore modules it imports (a name from a package counts as its __init__)."""
    names = {module_name(p) for p in paths} | {"perfcore._C"}  # the compiled extension: a leaf
    graph: dict[str, set[str]] = {}
    for p in paths:
        me, deps = module_name(p), set()
        for _, target, imported in imports_of(p):
            if target == "perfcore" and imported == ["_C"]:
                target = "perfcore._C"
            while target and target not in names:
                target = target.rpartition(".")[0]
            if target and target != me:
                deps.add(target)
        graph[me] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = set()
                while True:
                    m = stack.pop()
                    on.discard(m)
                    part.add(m)
                    if m == node:
                        break
                if len(part) > 1:
                    found.append(part)
    return found


PACKAGE_MODULES = sorted(p for p in PKG.rglob("*.py") if p.parent.name != "_boot")


def test_no_import_cycle() -> None:
    found = [c for c in cycles(import_graph(PACKAGE_MODULES)) if c not in KNOWN_CYCLES]
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(sorted(c)) for c in found)


def test_the_list_of_known_cycles_only_shrinks() -> None:
    stale = [c for c in KNOWN_CYCLES if c not in cycles(import_graph(PACKAGE_MODULES))]
    assert not stale, f"{stale} are no longer cycles: take them off KNOWN_CYCLES"


def test_the_cycle_check_sees_a_cycle_through_a_deferred_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_label_list_lives_in_a_leaf() -> None:
    from perfcore.analysis import attribution, labels

    assert attribution.LABELS is labels.LABELS
    assert not [t for _, t, _ in imports_of(PKG / "analysis" / "labels.py") if t.startswith("perfcore")]


# -- private attributes stay in the module that defines them -------------------------------------
def _private_attributes(path: Path) -> tuple[set[str], list[tuple[int, str, str]]]:
    """(the private names the module defines: `def _x`, `class _X`, `_x = ...` at any level, `self._x = ...`;
    every `<obj>._x` read or written where <obj> is not self or cls: (line, _x, the expression))."""
    tree = ast.parse(path.read_text())
    defined: set[str] = set()
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if own and isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
            elif not own:
                uses.append((node.lineno, node.attr, ast.unparse(node)))
    return defined, uses


PRIVATES = {p: _private_attributes(p) for p in MODULES}
DEFINED_ANYWHERE: dict[str, set[Path]] = {}
for _p, (_defined, _) in PRIVATES.items():
    for _n in _defined:
        DEFINED_ANYWHERE.setdefault(_n, set()).add(_p)
# Modules that still reach into the Recording's privates: the engine's public interface does not yet cover
# what they need. The list only shrinks (a module that no longer reaches fails the stale-entry test).
REACHES_INTO_THE_ENGINE: set[str] = set()


def _reaches(path: Path) -> list[str]:
    defined, uses = PRIVATES[path]
    return [f"{path.relative_to(PKG.parent)}:{line} {text}" for line, name, text in uses
            if name not in defined and DEFINED_ANYWHERE.get(name, set()) - {path}]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_private_attributes_across_modules(path: Path) -> None:
    """`obj._x` is a module's own business: allowed on self and cls, and where the module itself defines
    _x (a class's helper, `TorchHooks._fork_hook` in hooks.py). A private name that no perfcore class
    sets on self (nor any module defines) belongs to another library (torch._C, sys._getframe, a
    DataLoader iterator's _num_yielded) or is a marker perfcore puts on a torch object (_perfcore_hooked):
    patching torch needs those, and their owners are outside this check. Anything else is one module
    reading or writing another's private state: give the owner a public method instead. A subclass that
    sets its base's privates on self is not seen here (recording/replay.py's Replayed)."""
    if str(path.relative_to(PKG)) in REACHES_INTO_THE_ENGINE:
        return
    found = _reaches(path)
    assert not found, "\n".join(found) + "\n(another module's private attribute: use its public interface)"


def test_the_list_of_modules_reaching_into_the_engine_only_shrinks() -> None:
    stale = [m for m in REACHES_INTO_THE_ENGINE if not _reaches(PKG / m)]
    assert not stale, f"{stale} no longer reach into the engine: take them off REACHES_INTO_THE_ENGINE"


def test_the_private_attribute_check_sees_a_reach(tmp_path: Path) -> None:
    owner, user = tmp_path / "owner.py", tmp_path / "user.py"
    owner.write_text("class A:\n    def __init__(self):\n        self._state = 1\n")
    user.write_text("def f(a, it):\n    a._state += 1\n    it._num_yielded\n    it._mark = 1\n    it._mark\n")
    (o_def, _), (u_def, u_uses) = _private_attributes(owner), _private_attributes(user)
    assert "_state" in o_def and not {"_state", "_mark", "_num_yielded"} & u_def
    reaching = [name for _, name, _ in u_uses if name not in u_def and name in o_def]
    assert reaching == ["_state"]  # a write to another's state; the foreign and marker names pass


def test_every_layer_exists() -> None:
    for prefix, _ in LAYERS:
        rel = prefix.replace(".", "/")
        if prefix == "perfcore._C":
            continue
        assert (PKG.parent / rel).is_dir() or (PKG.parent / f"{rel}.py").exists(), prefix


# -- the two processes of `perfcore run` ----------------------------------------------------------
RUN = PKG / "run"
PARENT, CHILD = "perfcore.run.parent", "perfcore.run.child"


def _side(module: str) -> str | None:
    if module == PARENT or module.startswith(PARENT + "."):
        return "parent"
    if module == CHILD or module.startswith(CHILD + "."):
        return "child"
    return None


@pytest.mark.parametrize("path", sorted(RUN.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_parent_and_child_meet_only_in_the_protocol(path: Path) -> None:
    if path.parent.name == "_boot":
        return
    me = module_name(path)
    mine = _side(me)
    crossings = [f"{path.relative_to(PKG.parent)}:{line} imports {target}"
                 for line, target, _ in imports_of(path)
                 if _side(target) is not None and mine is not None and _side(target) != mine
                 or mine is None and _side(target) is not None]
    assert not crossings, "\n".join(crossings) + "\n(what crosses between the processes belongs in run/protocol.py)"


def test_the_protocol_stands_alone_and_both_sides_use_it() -> None:
    assert not [t for _, t, _ in imports_of(RUN / "protocol.py") if t.startswith("perfcore")]
    users = {_side(module_name(p)) for p in RUN.rglob("*.py")
             if any(t == "perfcore.run.protocol" for _, t, _ in imports_of(p))}
    assert {"parent", "child"} <= users


def test_environment_names_are_spelled_only_in_the_protocol() -> None:
    """A PERFCORE_* variable the parent sets and the child reads is named once (the boot file runs
    before perfcore is importable and spells the one it checks)."""
    found = []
    for path in sorted(RUN.rglob("*.py")) + sorted((PKG / "integrations").rglob("*.py")) + \
            sorted((PKG / "experiments").rglob("*.py")):
        if path.name == "protocol.py" or path.parent.name == "_boot":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value.startswith("PERFCORE_") and " " not in node.value:
                found.append(f"{path.relative_to(PKG.parent)}:{node.lineno} {node.value}")
    assert not found, "\n".join(found)


# -- StepTimer is the user's API; run/ and the integrations drive the recording under it -------------
def _class(path: Path, name: str) -> ast.ClassDef:
    return next(n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef) and n.name == name)


def _public_names(cls: ast.ClassDef) -> set[str]:
    names = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
            if node.name == "__init__":  # attributes the constructor sets: self.x = ...
                names |= {t.attr for n in ast.walk(node) if isinstance(n, (ast.Assign, ast.AnnAssign))
                          for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                          if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return {n for n in names if not n.startswith("_")}


USER_API = {"load", "phase", "transfer", "compute", "comm", "step", "summary", "result", "report", "close",
            "device", "warmup", "step_on", "backend", "notes", "steps", "STEP_ON", "engine"}


def test_step_timer_holds_only_the_user_api() -> None:
    assert _public_names(_class(PKG / "timing.py", "StepTimer")) == USER_API


def _timer_uses(path: Path) -> list[tuple[int, str]]:
    """(line, attribute) for every attribute taken from a StepTimer: a name or attribute called
    `timer`, or a local bound to one (t = self.timer)."""
    tree = ast.parse(path.read_text())

    def is_timer(e: ast.expr, aliases: set[str]) -> bool:
        return (isinstance(e, ast.Name) and (e.id == "timer" or e.id in aliases)) or \
            (isinstance(e, ast.Attribute) and e.attr == "timer")

    uses = []
    for scope in [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        aliases = {t.id for n in ast.walk(scope) if isinstance(n, ast.Assign) and is_timer(n.value, set())
                   for t in n.targets if isinstance(t, ast.Name)}
        uses += [(n.lineno, n.attr) for n in ast.walk(scope)
                 if isinstance(n, ast.Attribute) and is_timer(n.value, aliases)]
    return sorted(set(uses))


CALLERS = sorted(p for d in ("run", "integrations") for p in (PKG / d).rglob("*.py"))


@pytest.mark.parametrize("path", CALLERS, ids=lambda p: str(p.relative_to(PKG)))
def test_run_and_integrations_use_only_the_user_api_of_step_timer(path: Path) -> None:
    outside = [f"{path.relative_to(PKG.parent)}:{line} timer.{attr}" for line, attr in _timer_uses(path)
               if attr not in USER_API]
    assert not outside, "\n".join(outside) + "\n(the recording's own interface is timer.engine)"


def test_the_user_api_check_sees_a_call_past_the_facade(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(inst):\n    t = inst.timer\n    t.boundaries\n    inst.timer.upkeep(3)\n"
                   "    t.engine.upkeep(3)\n")
    assert [a for _, a in _timer_uses(bad) if a not in USER_API] == ["boundaries", "upkeep"]


# -- sizes -----------------------------------------------------------------------------------------
# Measured on the formatter's output (ruff format, 120 columns): past the first pair a module or class
# is worth splitting along a seam (a warning); past the second it must be.
WARN_MODULE, WARN_CLASS = 400, 250
MAX_MODULE, MAX_CPP, MAX_CLASS = 600, 400, 350
CSRC = PKG.parent / "csrc"


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_or_class_is_too_long(path: Path) -> None:
    text = path.read_text()
    lines = len(text.splitlines())
    assert lines <= MAX_MODULE, f"{path.relative_to(PKG.parent)} has {lines} lines (at most {MAX_MODULE})"
    sizes = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)]
    long = [f"class {name}: {n} lines" for name, n in sizes if n > MAX_CLASS]
    assert not long, f"{path.relative_to(PKG.parent)}: {long} (at most {MAX_CLASS})"
    big = ([f"{lines} lines (warn at {WARN_MODULE})"] if lines > WARN_MODULE else []) + [
        f"class {name}: {n} lines (warn at {WARN_CLASS})" for name, n in sizes if n > WARN_CLASS
    ]
    if big:
        warnings.warn(f"{path.relative_to(PKG.parent)}: {'; '.join(big)}: worth splitting along a seam", stacklevel=1)


@pytest.mark.parametrize("path", sorted(p for p in CSRC.rglob("*") if p.suffix in (".cpp", ".cu", ".h", ".cuh", ".hpp")),
                         ids=lambda p: str(p.relative_to(CSRC)))
def test_no_cpp_file_is_too_long(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_CPP, f"{path.relative_to(PKG.parent)} has {lines} lines (at most {MAX_CPP})"


def test_the_boot_file_checks_the_protocols_run_dir_variable() -> None:
    from perfcore.run.protocol import BOOT_DIR, ENV_CHILD_CONFIG

    assert f'os.environ.get("{ENV_CHILD_CONFIG}")' in (BOOT_DIR / "sitecustomize.py").read_text()


BENCH = sorted((PKG.parent / "bench").glob("*.py"))


@pytest.mark.parametrize("path", BENCH, ids=lambda p: p.name)
def test_bench_reaches_no_private_attribute_of_perfcore(path: Path) -> None:
    """The GPU check and the benchmarks run where CI does not (a lent GPU, a quiet machine): a private of
    perfcore's that they read breaks there, silently here, when its owner renames it (engine._store
    became engine.store and two gpu_check rows crashed on the device). They use the public interface."""
    defined, uses = _private_attributes(path)
    found = [f"bench/{path.name}:{line} {text}" for line, name, text in uses
             if name not in defined and DEFINED_ANYWHERE.get(name)]
    assert not found, "\n".join(found)
