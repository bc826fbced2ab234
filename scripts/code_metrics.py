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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOT_TOKENS = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT}
DICTS = {"dict", "Mapping", "MutableMapping", "list"}
EXEMPTION = re.compile(r"#\s*noqa:[^#]*\b(C901|PLR09\d\d)\b")
LONG_FUNCTIONS = {"finish_run": 40, "measure_workload": 60, "render_text": 60}


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
        "tokens": tokens,
        "files": len(files),
        "functions": functions,
    }


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
