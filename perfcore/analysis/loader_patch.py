"""The keyword change for the user's DataLoader call as a unified diff `git apply` takes: every DataLoader
call found with ast at the line perfcore recorded, each setting given where the call gives it (as a
keyword, or by position: DataLoader(ds, 4, True) passes batch_size and shuffle), missing ones added after
the last argument (on a line of their own when the call puts one argument per line) unless torch's own
default is the value. Pure: it takes the file's text and returns the diff (and the file as patched); the
user's file is never touched.
"""

from __future__ import annotations

import ast
import difflib
import io
from dataclasses import dataclass
from typing import Mapping

__all__ = ["LoaderPatch", "loader_patch", "PatchError", "PATCH_NAME", "TORCH_DEFAULTS", "POSITIONAL"]

_LITERALS = (bool, int, float, str, type(None))

# The sweep's patch, in its folder: the one name a document may give it (a `git apply` line names nothing else).
PATCH_NAME = "dataloader.patch"
# torch.utils.data.DataLoader's parameters that may be passed by position, in order (after the dataset),
# and the defaults of those a sweep sets: a value equal to one is left out where the call does not set it.
POSITIONAL = (
    "dataset",
    "batch_size",
    "shuffle",
    "sampler",
    "batch_sampler",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
)
TORCH_DEFAULTS = {"batch_size": 1, "num_workers": 0, "pin_memory": False, "persistent_workers": False}
# prefetch_factor's default (None) means 2 batches a worker wherever there are workers.
PREFETCH_DEFAULT = 2


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
    after: str = ""  # the whole file as patched
    calls: int = 1  # DataLoader calls at the line, every one patched


def _is_loader(node: ast.AST) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return (isinstance(f, ast.Name) and f.id == "DataLoader") or (
        isinstance(f, ast.Attribute) and f.attr == "DataLoader"
    )


def _find_calls(tree: ast.AST, line: int) -> list[ast.Call]:
    """Every DataLoader call at `line`: the innermost ones spanning it (a wrapped call's every line is its
    line; two calls on one line are both there)."""
    spans = [n for n in ast.walk(tree) if _is_loader(n) and n.lineno <= line <= n.end_lineno]
    inner = [n for n in spans if not any(m is not n and _inside(m, n) for m in spans)]
    if not inner:
        raise PatchError(f"no DataLoader(...) call at line {line}")
    return sorted(inner, key=lambda n: (n.lineno, n.col_offset))


def _lines(text: str) -> list[str]:
    """The lines of `text` as Python counts them (ast's line numbers): split at \\n, \\r\\n and \\r only.
    str.splitlines also splits at a form feed (between sections of a file), \\x1c-\\x1e, \\x85, \\u2028 and
    \\u2029, which a line of source may hold: every later edit would then land lines away from its call."""
    return io.StringIO(text, newline="").readlines()


def _inside(inner: ast.AST, outer: ast.AST) -> bool:
    return (outer.lineno, outer.col_offset) <= (inner.lineno, inner.col_offset) and (
        inner.end_lineno,
        inner.end_col_offset,
    ) <= (outer.end_lineno, outer.end_col_offset)


def _check_path(path: str) -> None:
    parts = path.replace("\\", "/").split("/")
    if not path or path.startswith("/") or ".." in parts or any(ord(c) < 32 for c in path):
        raise PatchError(f"{path!r} is not a relative path inside the project (no '..', no control characters)")


def loader_patch(source: str, path: str, line: int, settings: Mapping[str, object]) -> LoaderPatch:
    """The diff that sets `settings` (keyword -> a literal) on every DataLoader call at `line` of `source`,
    the file at `path` relative to where the user runs `git apply`."""
    _check_path(path)
    for k, v in settings.items():
        if not k.isidentifier() or not isinstance(v, _LITERALS):
            raise PatchError(f"setting {k!r}={v!r} is not a keyword with a literal value")
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise PatchError(f"{path} does not parse: {e.msg} at line {e.lineno}") from None
    calls = _find_calls(tree, line)
    lines = _lines(source)
    raw = [ln.encode() for ln in lines]  # ast's columns are UTF-8 byte offsets
    edits: list[tuple[int, int, int, int, bytes]] = []  # (line0, col0, line1, col1, new bytes), 1-based lines
    changed: list[tuple[str, str | None, str]] = []
    for call in calls:
        call_edits, call_changed = _call_edits(source, raw, call, settings)
        edits += call_edits
        changed += [c for c in call_changed if c not in changed]
    for l0, c0, l1, c1, new in sorted(edits, reverse=True):
        head, tail = raw[l0 - 1][:c0], raw[l1 - 1][c1:]
        raw[l0 - 1 : l1] = [head + new + tail]
    after = b"".join(raw).decode()
    # Read back as they now are: an edit never moves a call off the line, so the same calls are found there.
    try:
        patched = _find_calls(ast.parse(after), line)
    except SyntaxError as e:  # an edit perfcore got wrong: said as such, never raised into the sweep
        raise PatchError(f"{path} would not parse once patched ({e.msg} at line {e.lineno})") from None
    shown = "; ".join(" ".join(ast.get_source_segment(after, c).split()) for c in patched)
    return LoaderPatch(
        path,
        calls[0].lineno,
        tuple(changed),
        any(k.arg is None for c in calls for k in c.keywords),
        shown.replace("( ", "(").replace(", )", ")"),
        _unified(lines, _lines(after), path),
        after,
        len(calls),
    )


def _call_edits(
    source: str, raw: list[bytes], call: ast.Call, settings: Mapping[str, object]
) -> tuple[list[tuple[int, int, int, int, bytes]], list[tuple[str, str | None, str]]]:
    """One call's edits: a setting it passes (by keyword or by position) gets its new value in place; one it
    does not pass is added, unless the value is torch's default."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        raise PatchError("the DataLoader call passes *args: which argument is which cannot be told")
    given: dict[str, ast.expr] = {k.arg: k.value for k in call.keywords if k.arg is not None}
    given.update({POSITIONAL[i]: a for i, a in enumerate(call.args) if i < len(POSITIONAL)})
    edits, changed, added = [], [], []
    for name, value in settings.items():
        new = repr(value)
        if name in given:
            v = given[name]
            old = ast.get_source_segment(source, v)
            if old != new:
                edits.append((v.lineno, v.col_offset, v.end_lineno, v.end_col_offset, new.encode()))
                changed.append((name, old, new))
        elif not _default(name, value):
            added.append((name, new))
    if added:
        edits.append(_insertion(call, raw, added))
        changed.extend((n, None, v) for n, v in added)
    return edits, changed


def _default(name: str, value: object) -> bool:
    """Whether `value` is what torch's DataLoader takes for `name` when the call does not say."""
    if name == "prefetch_factor":
        return value is None or value == PREFETCH_DEFAULT
    return name in TORCH_DEFAULTS and type(value) is type(TORCH_DEFAULTS[name]) and value == TORCH_DEFAULTS[name]


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
