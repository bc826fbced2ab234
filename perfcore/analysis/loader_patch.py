"""The keyword change for the user's DataLoader call as a unified diff `git apply` takes: the call found
with ast at the line perfcore recorded, existing keywords given new values, missing ones added after the
last argument (on a line of their own when the call puts one argument per line). Pure: it takes the
file's text and returns the diff; the user's file is never touched.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from typing import Mapping

__all__ = ["LoaderPatch", "loader_patch", "PatchError"]

_LITERALS = (bool, int, float, str, type(None))


class PatchError(ValueError):
    """The call cannot be patched: no DataLoader call at that line, a setting that is no literal, a bad path."""


@dataclass(frozen=True)
class LoaderPatch:
    path: str  # relative, as in the diff's a/ and b/ names
    line: int  # the call's first line
    changed: tuple[tuple[str, str | None, str], ...]  # (keyword, old source or None when added, new source)
    through_kwargs: bool  # the call also passes **kwargs, which may hold a keyword set here
    call: str  # the call as it reads after the change, on one line: DataLoader(ds, ..., num_workers=2)
    diff: str


def _is_loader(node: ast.AST) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Name) and f.id == "DataLoader") or (
        isinstance(f, ast.Attribute) and f.attr == "DataLoader"
    )


def _find_call(tree: ast.AST, line: int) -> ast.Call:
    spans = [n for n in ast.walk(tree) if _is_loader(n) and n.lineno <= line <= n.end_lineno]
    if not spans:
        raise PatchError(f"no DataLoader(...) call at line {line}")
    return min(spans, key=lambda n: (n.end_lineno - n.lineno, n.end_col_offset - n.col_offset))


def _check_path(path: str) -> None:
    parts = path.replace("\\", "/").split("/")
    if not path or path.startswith("/") or ".." in parts or any(ord(c) < 32 for c in path):
        raise PatchError(f"{path!r} is not a relative path inside the project (no '..', no control characters)")


def loader_patch(source: str, path: str, line: int, settings: Mapping[str, object]) -> LoaderPatch:
    """The diff that sets `settings` (keyword -> a literal) on the DataLoader call spanning `line` of
    `source`, the file at `path` relative to where the user runs `git apply`."""
    _check_path(path)
    for k, v in settings.items():
        if not k.isidentifier() or not isinstance(v, _LITERALS):
            raise PatchError(f"setting {k!r}={v!r} is not a keyword with a literal value")
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise PatchError(f"{path} does not parse: {e.msg} at line {e.lineno}") from None
    call = _find_call(tree, line)
    lines = source.splitlines(keepends=True)
    raw = [ln.encode() for ln in lines]  # ast's columns are UTF-8 byte offsets
    edits: list[tuple[int, int, int, int, bytes]] = []  # (line0, col0, line1, col1, new bytes), 1-based lines
    changed = []
    kw = {k.arg: k for k in call.keywords if k.arg is not None}
    for name, value in settings.items():
        new = repr(value)
        if name in kw:
            v = kw[name].value
            old = ast.get_source_segment(source, v)
            if old != new:
                edits.append((v.lineno, v.col_offset, v.end_lineno, v.end_col_offset, new.encode()))
                changed.append((name, old, new))
    added = [(n, repr(v)) for n, v in settings.items() if n not in kw]
    if added:
        edits.append(_insertion(call, raw, added))
        changed.extend((n, None, v) for n, v in added)
    for l0, c0, l1, c1, new in sorted(edits, reverse=True):
        head, tail = raw[l0 - 1][:c0], raw[l1 - 1][c1:]
        raw[l0 - 1 : l1] = [head + new + tail]
    after = b"".join(raw).decode()
    out_call = ast.get_source_segment(after, _find_call(ast.parse(after), call.lineno))
    return LoaderPatch(
        path,
        call.lineno,
        tuple(changed),
        any(k.arg is None for k in call.keywords),
        " ".join(out_call.split()).replace("( ", "(").replace(", )", ")"),
        _unified(lines, after.splitlines(keepends=True), path),
    )


def _insertion(call: ast.Call, raw: list[bytes], added: list[tuple[str, str]]) -> tuple[int, int, int, int, bytes]:
    args = sorted(list(call.args) + list(call.keywords), key=lambda n: (n.lineno, n.col_offset))
    text = [f"{n}={v}" for n, v in added]
    if not args:  # DataLoader(): just inside the closing parenthesis
        at = (call.end_lineno, call.end_col_offset - 1)
        return (*at, *at, ", ".join(text).encode())
    last = args[-1]
    at = (last.end_lineno, last.end_col_offset)

    def own_line(n: ast.AST) -> bool:
        return not raw[n.lineno - 1][: n.col_offset].strip()

    # One a line: the last argument and the one before it each begin a line (a wrapped call does not).
    one_per_line = last.lineno > call.lineno and own_line(last) and (len(args) == 1 or own_line(args[-2]))
    if one_per_line:  # the call lists its arguments one a line: so do the added ones, at the same indent
        indent = raw[last.lineno - 1][: last.col_offset].decode()
        indent = indent if not indent.strip() else " " * len(indent)
        return (*at, *at, "".join(f",\n{indent}{t}" for t in text).encode())
    return (*at, *at, "".join(f", {t}" for t in text).encode())


def _unified(before: list[str], after: list[str], path: str) -> str:
    out = []
    for ln in difflib.unified_diff(before, after, f"a/{path}", f"b/{path}", n=3):
        out.append(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n")
    return "".join(out)
