"""The sweep's best DataLoader settings as a patch for the user's own call: read the script's file at the
DataLoader's recorded file:line (read only), try the patched file on a copy (the command run for a few
steps under `perfcore run`, the copy in place of the file), and only where that run did not fail write
dataloader.patch into the sweep's folder and say the call as it would read. The user applies it with
`git apply <folder>/dataloader.patch` from `cwd`."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from perfcore.analysis.loader_patch import PATCH_NAME, LoaderPatch, PatchError, loader_patch
from perfcore.experiments.sweep_results import CONFIG_KEYS, setting_value

__all__ = ["PATCH_NAME", "sweep_patch", "TRY_STEPS"]

MAX_SOURCE_BYTES = 4 << 20  # a script larger than this is no training script to patch
# The patched script's try: enough steps for the loader's first batches from its workers (where a setting of
# the wrong type fails), few enough to cost about one start of the script.
TRY_STEPS, TRY_WARMUP = 2, 1
TRY_FOLDER = "patch_try"

# Run in place of the user's script for the try: the user's command with one file's patched copy read in place
# of the file (the script itself, or a module it imports), under the file's own name, so that the script's
# __file__, its imports and the DataLoader's recorded site are the user's. A bytecode cache of its own keeps
# the file's cached bytecode from standing in for the copy.
_RUNNER = """\
import importlib.machinery, os, runpy, sys, types
original, copy, how, target = sys.argv[1:5]
sys.argv = [target, *sys.argv[5:]]
sys.pycache_prefix = os.path.dirname(copy)
_get_data = importlib.machinery.SourceFileLoader.get_data


def _patched(self, path):
    if os.path.realpath(path) == original:
        with open(copy, "rb") as fh:
            return fh.read()
    return _get_data(self, path)


importlib.machinery.SourceFileLoader.get_data = _patched
if how == "-m":
    sys.path[0] = os.getcwd()
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    sys.path[0] = os.path.dirname(os.path.realpath(target))
    main = types.ModuleType("__main__")
    main.__file__ = target
    sys.modules["__main__"] = main
    with open(copy if os.path.realpath(target) == original else target, "rb") as fh:
        code = compile(fh.read(), target, "exec")
    exec(code, main.__dict__)
"""

# Interpreter options that take the next argument as their value (python -W ignore train.py).
_OPTS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def _settings(best: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    # Only what the sweep changed, each of the type DataLoader takes (an integer never as 2.0), and never a
    # prefetch_factor without workers (DataLoader refuses it).
    out = {k: setting_value(k, best[k]) for k in CONFIG_KEYS if best.get(k) is not None and best.get(k) != own.get(k)}
    if not best.get("num_workers"):
        out.pop("prefetch_factor", None)
    return out


def _split(cmd: list[str]) -> tuple[list[str], str, str, list[str]] | None:
    """(interpreter and its options, "-m" or "", the script or module, its arguments) of `python [opts]
    script.py args` or `python [opts] -m module args`; None for any other command (-c, stdin, torchrun)."""
    if not cmd or not Path(cmd[0]).name.startswith("python"):
        return None
    i = 1
    while i < len(cmd):
        a = cmd[i]
        if a in ("-", "--") or not a.startswith("-"):
            return None if a in ("-", "--") else (cmd[:i], "", a, cmd[i + 1 :])
        i += 1
        if a in _OPTS_WITH_VALUE:
            i += 1
            continue
        if a.startswith("--"):
            continue
        for k, letter in enumerate(a[1:], 1):  # a cluster such as -uc: each letter an option
            if letter == "c":
                return None
            if letter == "m":
                module = a[k + 1 :] or (cmd[i] if i < len(cmd) else "")
                rest = cmd[i:] if a[k + 1 :] else cmd[i + 1 :]
                head = cmd[: i - 1] + ([a[:k]] if k > 1 else [])
                return (head, "-m", module, rest) if module else None
            if letter in "WX":
                i += 0 if a[k + 1 :] else 1  # its value is the rest of the cluster, or the next word
                break
    return None


def _try(
    cmd: list[str] | None,
    real: str,
    patch: LoaderPatch,
    settings: Mapping[str, Any],
    out: Path,
    on_try: Callable[[], None] | None = None,
) -> str | None:
    """Runs the command with the patched copy of `real` for a few steps under `perfcore run` (the try's run
    folder in the sweep's folder): None when it ran its steps and its training loader has the settings, else
    why not, in words for the line that says the patch was not offered."""
    from perfcore.errors import PerfcoreError
    from perfcore.experiments.measurement import Trial
    from perfcore.experiments.scripts import script_document

    split = _split(list(cmd or []))
    if split is None:
        return "the command is not `python script.py` or `python -m module`, so the patched copy could not be run"
    head, how, target, args = split
    if on_try is not None:
        on_try()
    with tempfile.TemporaryDirectory(prefix="perfcore-patch-") as tmp:
        copy = Path(tmp) / Path(real).name
        copy.write_text(patch.after, encoding="utf-8")
        runner = Path(tmp) / "perfcore_patched_run.py"
        runner.write_text(_RUNNER, encoding="utf-8")
        tried = [*head, str(runner), real, str(copy), how or "-", target, *args]
        try:
            doc, _, _ = script_document(tried, out / TRY_FOLDER, Trial(steps=TRY_STEPS, warmup=TRY_WARMUP))
        except PerfcoreError as e:
            return f"the patched script failed its try: {str(e).splitlines()[0][:200]}"
    if doc.exit_code or not doc.steps:
        from perfcore.report.words.runs import exit_words  # how it ended, said from its codes

        ended = exit_words(doc) if doc.exit is not None or doc.outcome is not None else ""
        return f"the patched script failed its try: it {ended or 'ended before a measured step'}"
    loader = next((ld for ld in doc.loaders if ld.training), None)
    if loader is None:
        return "the patched script's try made no training DataLoader"
    differs = {k: getattr(loader, k) for k, v in settings.items() if getattr(loader, k) != v}
    if differs:
        got = ", ".join(f"{k}={v!r}" for k, v in differs.items())
        return f"the patched call did not give its DataLoader the settings in its try ({got})"
    return None


def sweep_patch(
    site: str | None,
    best: Mapping[str, Any] | None,
    own: Mapping[str, Any],
    out: Path,
    cwd: str | None = None,
    cmd: list[str] | None = None,
    on_try: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """{"status": written | unchanged | not_possible, "reason" (a code: no_site, own_is_best, not_under_cwd
    with site and cwd, cannot_patch with the error, failed_try with the error; report.words.findings says it, within_noise with the speedup and noise_share),
    "patch" (file name), "call", "at", "calls" (DataLoader calls at the line, all patched)}. `site` is the
    recorded "file:line" (untrusted: read, never written; it must lie under `cwd`); `cmd` the sweep's
    command, run once more with the patched copy before the patch is offered (`on_try` called as that run
    starts, and only then: progress says a try only where one runs)."""
    if not site or not best:
        return {"status": "not_possible", "reason": "no_site"}
    settings = _settings(best, own)
    if not settings:
        return {"status": "unchanged", "reason": "own_is_best"}
    file, _, line = site.rpartition(":")
    cwd = os.path.realpath(os.getcwd() if cwd is None else cwd)
    real = os.path.realpath(file)
    rel = os.path.relpath(real, cwd)
    if not line.isdigit() or rel.startswith("..") or not os.path.isfile(real):
        return {"status": "not_possible", "reason": "not_under_cwd", "site": site, "cwd": cwd}
    try:
        if os.path.getsize(real) > MAX_SOURCE_BYTES:
            raise PatchError(f"{rel} is over {MAX_SOURCE_BYTES >> 20} MiB")
        with open(real, encoding="utf-8") as fh:
            source = fh.read()
        p = loader_patch(source, rel, int(line), settings)
    except (OSError, UnicodeDecodeError, PatchError) as e:
        return {"status": "not_possible", "reason": "cannot_patch", "error": str(e)}
    if not p.diff:
        return {"status": "unchanged", "reason": "own_is_best"}
    failed = _try(cmd, real, p, settings, Path(out), on_try)
    if failed:
        return {"status": "not_possible", "reason": "failed_try", "error": failed}
    from perfcore import jsonio

    jsonio.write_text(out / PATCH_NAME, p.diff)
    return {
        "status": "written",
        "patch": PATCH_NAME,
        "at": f"{rel}:{p.line}",
        "call": p.call,
        "calls": p.calls,
        "changed": [list(c) for c in p.changed],
        "through_kwargs": p.through_kwargs,
    }
