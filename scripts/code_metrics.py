"""The figures of perfcore's code that say whether results are one typed model said by report/ alone, each
measured the same way every time and printed beside its target.

    python scripts/code_metrics.py [ROOT]     (ROOT: a checkout, default this one; --json for the figures)

How each is measured (on perfcore/**/*.py as text or as Python's ast/tokenize read it):
  .get("            occurrences of the text `.get("`
  isinstance        isinstance(x, T) calls in report/ whose T names dict, Mapping, MutableMapping or list
  say* writers      top-level functions named say or say_*
  report/ modules   its .py files, __init__ included
  report/ depth     modules in the longest chain of report/ modules importing report/ modules, function-level
                    imports included (an import cycle is reported as such)
  words modules     modules whose name ends in "words" (words.py and the *_words.py) and the modules of a
                    words/ package (a catalog split by concern counts as its modules, not as one)
  function lines    def line to last line (ast), wherever the function lives; "gone" where none has the name
  exemptions        lines with a `# noqa:` naming C901 or a PLR09xx rule
  exempted sizes    the growth gate: every such comment in what the complexity gate checks (GATED), tied to the
                    function whose signature holds it, against EXEMPTED, the ledger of the functions allowed
                    one, with their rules, lines (def to last line) and statements (ast statements within,
                    nested ones included) when recorded: a new one, a new rule, a function grown past either
                    size, or a row whose exemption is gone is a problem (tests/test_code_metrics.py); a noqa
                    comment naming no rule, or a file's ruff-noqa, exempts every rule; so is pyproject.toml
                    loosening the gate (a limit raised, a rule not selected or ignored, per file or not)
  tokens            tokenize tokens but NL, NEWLINE, INDENT, DEDENT and COMMENT
  files, functions  .py files; def and async def (methods and nested functions included)
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOT_TOKENS = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT}
DICTS = {"dict", "Mapping", "MutableMapping", "list"}
EXEMPTION = re.compile(r"#\s*noqa:[^#]*\b(C901|PLR09\d\d)\b")
# A noqa comment that names no rule silences every rule on its line, the gate's too; a ruff-noqa one a file.
BARE_NOQA = re.compile(r"#\s*noqa(?!\s*:)\b")
FILE_NOQA = re.compile(r"#\s*ruff\s*:\s*noqa")
LONG_FUNCTIONS = {"finish_run": 40, "measure_workload": 60, "render_text": 60}
# What the complexity gate (ruff's C901/PLR09xx, scripts/test.sh) checks, as the growth gate reads it.
GATED = ("perfcore", "bench", "scripts", "setup.py")
# The gate's limits as pyproject.toml sets them: raising one, or ignoring a rule for a file, is an
# exemption in another place.
LIMITS = {
    ("mccabe", "max-complexity"): 15,
    ("pylint", "max-branches"): 15,
    ("pylint", "max-args"): 8,
    ("pylint", "max-statements"): 60,
}
GATE_RULES = ("C901", "PLR0912", "PLR0913", "PLR0915")


@dataclass(frozen=True)
class Exempted:
    """A function that keeps a complexity exemption: the rules it names, and its size."""

    rules: tuple[str, ...]
    lines: int
    statements: int


# The ledger: each function allowed a complexity exemption, at its size when recorded. It only shrinks: a
# function split below the limits loses its `noqa` and its row; one that grows past a figure here fails the
# gate (split it instead of raising the figure).
EXEMPTED = {
    "perfcore/shapes.py:problem": Exempted(("C901", "PLR0912"), lines=53, statements=52),
}


def _module(path: Path, package: Path) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imported(tree: ast.AST, here: str, is_package: bool) -> set[str]:
    """Every module name an import in `tree` names (function-level imports too), with `from a import b`
    giving a.b as well, for b may be a module."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:  # relative: from the module's package, up level - 1
                pkg = here.split(".") if is_package else here.split(".")[:-1]
                pkg = pkg[: len(pkg) - (n.level - 1)]
                base = ".".join(pkg + ([n.module] if n.module else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in n.names)
    return out


def _longest_chain(graph: dict[str, set[str]]) -> tuple[list[str], list[str]]:
    """(the longest chain of modules, a cycle found on the way or [])."""
    best: dict[str, list[str]] = {}
    cycle: list[str] = []

    def chain(m: str, stack: tuple[str, ...]) -> list[str]:
        nonlocal cycle
        if m in stack:
            cycle = cycle or [*stack[stack.index(m) :], m]
            return []
        if m not in best:
            below = [chain(x, (*stack, m)) for x in sorted(graph[m])]
            best[m] = [m, *max(below, key=len, default=[])]
        return best[m]

    longest = max((chain(m, ()) for m in sorted(graph)), key=len, default=[])
    return longest, cycle


def measure(root: Path) -> dict:
    package = root / "perfcore"
    files = sorted(package.rglob("*.py"))
    text = {f: f.read_text(encoding="utf-8") for f in files}
    trees = {f: ast.parse(s, str(f)) for f, s in text.items()}
    report = [f for f in files if f.parent == package / "report" or (package / "report") in f.parents]

    def in_report(f: Path) -> bool:
        return f in report

    isinstances = 0
    for f in report:
        for n in ast.walk(trees[f]):
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id == "isinstance"
                and len(n.args) == 2
            ):
                named = {x.id for x in ast.walk(n.args[1]) if isinstance(x, ast.Name)}
                named |= {x.attr for x in ast.walk(n.args[1]) if isinstance(x, ast.Attribute)}
                isinstances += bool(named & DICTS)

    says = sorted(
        f"{f.relative_to(root)}:{n.name}"
        for f in files
        for n in trees[f].body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and (n.name == "say" or n.name.startswith("say_"))
    )

    names = {_module(f, package): f for f in report}
    graph = {
        m: {x for x in _imported(trees[f], m, f.name == "__init__.py") if x in names and x != m}
        for m, f in names.items()
    }
    chain, cycle = _longest_chain(graph)

    lengths: dict[str, list[tuple[str, int]]] = {k: [] for k in LONG_FUNCTIONS}
    functions = 0
    for f in files:
        for n in ast.walk(trees[f]):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions += 1
                if n.name in lengths:
                    lengths[n.name].append((f"{f.relative_to(root)}:{n.lineno}", n.end_lineno - n.lineno + 1))

    tokens = 0
    for s in text.values():
        tokens += sum(t.type not in NOT_TOKENS for t in tokenize.generate_tokens(io.StringIO(s).readline))

    return {
        "get_calls": sum(s.count('.get("') for s in text.values()),
        "get_calls_report": sum(s.count('.get("') for f, s in text.items() if in_report(f)),
        "dict_isinstance_report": isinstances,
        "say_writers": says,
        "report_modules": len(report),
        "report_depth": len(chain),
        "report_chain": chain,
        "report_cycle": cycle,
        "words_modules": sorted(
            str(f.relative_to(root)) for f in files if f.stem.endswith("words") or f.parent.name == "words"
        ),
        "function_lines": lengths,
        "exemptions": sum(bool(EXEMPTION.search(line)) for s in text.values() for line in s.splitlines()),
        "gate": gate(exempted(root), EXEMPTED) + limit_problems(root),
        "tokens": tokens,
        "files": len(files),
        "functions": functions,
    }


def _gated_files(root: Path) -> list[Path]:
    out: list[Path] = []
    for name in GATED:
        path = root / name
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else []
    return out


def _signature_owner(tree: ast.AST, line: int) -> tuple[str, ast.AST] | None:
    """The innermost function whose signature (its def line up to its first statement) holds `line`, by
    qualified name."""
    found = None

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            name = (
                f"{prefix}{child.name}"
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                else prefix
            )
            if (
                isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                and child.lineno <= line < child.body[0].lineno
            ):
                found = (name, child)
            visit(child, f"{name}." if name != prefix else prefix)

    visit(tree, "")
    return found


def exempted(root: Path) -> dict[str, Exempted]:
    """Every complexity exemption in GATED, by `path:function` (`path:line` where no function's signature
    holds the comment), with the function's size. Comments only: a `noqa` inside a string is none."""
    out: dict[str, Exempted] = {}
    for f in _gated_files(root):
        text = f.read_text(encoding="utf-8")
        tree = None
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT:
                continue
            if not (EXEMPTION.search(tok.string) or BARE_NOQA.search(tok.string) or FILE_NOQA.search(tok.string)):
                continue
            tree = tree or ast.parse(text, str(f))
            owner = _signature_owner(tree, tok.start[0])
            named = tuple(sorted(set(re.findall(r"\b(C901|PLR09\d\d)\b", tok.string)))) or ("every rule",)
            rel = f.relative_to(root).as_posix()
            if owner is None:
                out[f"{rel}:{tok.start[0]}"] = Exempted(named, 0, 0)
                continue
            name, fn = owner
            statements = sum(isinstance(n, ast.stmt) for n in ast.walk(fn)) - 1  # the def itself is not counted
            out[f"{rel}:{name}"] = Exempted(named, fn.end_lineno - fn.lineno + 1, statements)
    return out


def limit_problems(root: Path) -> list[str]:
    """Where pyproject.toml loosens the complexity gate: a limit above LIMITS, a gate rule not selected, or
    one ignored (for every file or per file)."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib
    path = root / "pyproject.toml"
    if not path.is_file():
        return []
    lint = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("ruff", {}).get("lint", {})
    problems = [
        f"pyproject.toml: {section}.{key} is {lint.get(section, {}).get(key)} (the gate's limit: {most})"
        for (section, key), most in LIMITS.items()
        if lint.get(section, {}).get(key, most) > most
    ]
    selected = set(lint.get("select", [])) | set(lint.get("extend-select", []))
    problems += [
        f"pyproject.toml: {rule} is not selected"
        for rule in GATE_RULES
        if not any(rule.startswith(code) or code == "ALL" for code in selected)
    ]
    ignored = list(lint.get("ignore", [])) + list(lint.get("extend-ignore", []))
    for where, rules in lint.get("per-file-ignores", {}).items():
        ignored += [f"{r} for {where}" for r in rules]
    # A code names its rule and every rule it prefixes (C9 is C901; PLR is all of pylint's refactor rules).
    problems += [
        f"pyproject.toml ignores {r}"
        for r in ignored
        if r.split()[0] == "ALL" or any(rule.startswith(r.split()[0]) for rule in GATE_RULES)
    ]
    return problems


def gate(found: dict[str, Exempted], ledger: dict[str, Exempted]) -> list[str]:
    """The growth gate's problems (none: it holds): each a line naming the function and what to do."""
    problems = []
    for key, now in sorted(found.items()):
        was = ledger.get(key)
        if was is None:
            problems.append(f"{key}: a new complexity exemption ({', '.join(now.rules)}); split it along a seam")
            continue
        if set(now.rules) - set(was.rules):
            problems.append(f"{key}: exempts {', '.join(sorted(set(now.rules) - set(was.rules)))} as well now")
        if now.lines > was.lines or now.statements > was.statements:
            problems.append(
                f"{key}: grew to {now.lines} lines, {now.statements} statements (recorded {was.lines}, "
                f"{was.statements}); an exempted function never grows: split it"
            )
    problems += [
        f"{key}: exempted no longer; take its row out of EXEMPTED (the ledger only shrinks)"
        for key in sorted(set(ledger) - set(found))
    ]
    return problems


def _lines(fig: dict) -> list[tuple[str, str, str, str]]:
    """(figure, value, target, where) rows."""
    depth = str(fig["report_depth"]) + (" (CYCLE)" if fig["report_cycle"] else "")
    rows = [
        ('.get(" in perfcore/', f"{fig['get_calls']:,}", "< 400", ""),
        ('.get(" in perfcore/report/', f"{fig['get_calls_report']:,}", "< 50", ""),
        ("isinstance(x, dict|Mapping|list) in report/", str(fig["dict_isinstance_report"]), "< 10", ""),
        ("say* writer functions", str(len(fig["say_writers"])), "0", ""),
        ("report/ modules", str(fig["report_modules"]), "<= 15", ""),
        ("report/ internal import depth", depth, "<= 4", ""),
        ("words modules (*words.py, words/)", str(len(fig["words_modules"])), "1 catalog", ""),
    ]
    for name, most in LONG_FUNCTIONS.items():
        found = fig["function_lines"][name]
        value = ", ".join(str(n) for _, n in found) if found else "gone"
        rows.append((f"{name} lines", value, f"<= {most}", ", ".join(at for at, _ in found)))
    return rows + [
        ("complexity exemptions (noqa C901/PLR09xx)", str(fig["exemptions"]), "<= 5", ""),
        ("exemption gate problems (new, grown)", str(len(fig["gate"])), "0", "; ".join(fig["gate"])),
        ("perfcore/ tokens", f"{fig['tokens']:,}", "<= 150,000", ""),
        ("perfcore/ files", str(fig["files"]), "-", ""),
        ("perfcore/ functions", f"{fig['functions']:,}", "-", ""),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", default=str(REPO), help="a perfcore checkout (default: this one)")
    ap.add_argument("--json", action="store_true", help="the figures as JSON")
    args = ap.parse_args(argv)
    fig = measure(Path(args.root).resolve())
    if args.json:
        print(json.dumps(fig, indent=1))
        return 0
    rows = _lines(fig)
    w0, w1, w2 = (max(len(r[i]) for r in rows) for i in range(3))
    print(f"{'figure':<{w0}}  {'now':>{w1}}  {'target':<{w2}}  where")
    for name, value, target, where in rows:
        print(f"{name:<{w0}}  {value:>{w1}}  {target:<{w2}}  {where}".rstrip())
    print(f"report/ longest import chain: {' -> '.join(m.rsplit('.', 1)[-1] for m in fig['report_chain'])}")
    if fig["report_cycle"]:
        print(f"report/ import cycle: {' -> '.join(fig['report_cycle'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
