"""The DataLoader patch: every diff is checked by `git apply --check` on a copy, applied, and the
patched call read back with ast; the original file is never written."""
from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from perfcore.analysis.loader_patch import PatchError, loader_patch

HERE = Path(__file__).parent
SETTINGS = {"num_workers": 2, "persistent_workers": True, "prefetch_factor": 4}


def _apply(tmp_path: Path, rel: str, source: str, patch) -> str:
    f = tmp_path / rel
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(source.encode())
    (tmp_path / "fix.patch").write_text(patch.diff)
    for args in (["--check"], []):
        r = subprocess.run(["git", "apply", *args, "fix.patch"], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, (r.stderr, patch.diff)
    return f.read_text()


def _keywords(source: str, line: int) -> dict[str, object]:
    call = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and n.lineno == line
                and getattr(n.func, "attr", getattr(n.func, "id", "")) == "DataLoader")
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords if isinstance(k.value, ast.Constant)}


CASES = {
    "one line, one kept, one changed": ("from torch.utils.data import DataLoader\nds = list(range(8))\n"
                                        "loader = DataLoader(ds, batch_size=8, num_workers=0)\nprint(1)\n", 3),
    "multi-line, one a line, trailing comma": ("import torch\n\nloader = torch.utils.data.DataLoader(\n    ds,\n"
                                               "    batch_size=8,\n    prefetch_factor=2,\n)\n", 3),
    "nested call, unicode before it, no final newline": ("x = 'é'; l = DataLoader(make(ds, k=1), 4)", 1),
    "empty call, a second loader on another line": ("a = DataLoader()\nb = DataLoader(ds)\n", 1),
    "line inside a wrapped call": ("loader = DataLoader(ds, batch_size=8,\n                    shuffle=True)\n", 2),
    "one argument on its own line": ("loader = DataLoader(\n    ds\n)\n", 1),
    # Characters str.splitlines takes for line ends but Python does not: edits must still land on the call.
    "a form feed between sections before it": ("import torch\n\x0c\n# data\nloader = DataLoader(ds, 8)\n", 4),
    "a line separator in a comment before it": ("x = 1  # a\u2028b\nloader = DataLoader(ds, 8)\n", 2),
    "separators in a string on its line": ("t = '\x1c\x85'; loader = DataLoader(ds, 8)\n", 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_patch_applies_and_sets_the_keywords(tmp_path, name):
    source, line = CASES[name]
    p = loader_patch(source, "src/train.py", line, SETTINGS)
    after = _apply(tmp_path, "src/train.py", source, p)
    got = _keywords(after, p.line)
    assert {k: got[k] for k in SETTINGS} == SETTINGS
    assert {k: v for k, v in got.items() if k not in SETTINGS} == \
        {k: v for k, v in _keywords(source, p.line).items() if k not in SETTINGS}  # the others kept
    assert after.count("DataLoader(") == source.count("DataLoader(")
    assert p.call.startswith(("DataLoader(", "torch.utils.data.DataLoader(")) and "num_workers=2" in p.call


def test_added_keywords_follow_the_calls_layout():
    wrapped = loader_patch(CASES["line inside a wrapped call"][0], "t.py", 1, {"num_workers": 2}).diff
    assert "+                    shuffle=True, num_workers=2)" in wrapped
    listed = loader_patch(CASES["multi-line, one a line, trailing comma"][0], "t.py", 3, {"num_workers": 2}).diff
    assert "+    num_workers=2,\n" in listed


def test_what_changed_is_listed_and_an_unchanged_value_is_no_edit():
    src = "loader = DataLoader(ds, num_workers=2, prefetch_factor=(2))\n"
    p = loader_patch(src, "t.py", 1, SETTINGS)
    assert p.changed == (("prefetch_factor", "2", "4"), ("persistent_workers", None, "True"))
    assert loader_patch(src, "t.py", 1, {"num_workers": 2}).diff == ""
    assert loader_patch("DataLoader(ds, **kw)\n", "t.py", 1, SETTINGS).through_kwargs


def test_a_real_script_and_the_users_file_is_untouched(tmp_path):
    """tests/realworld/image_classifier.py: a two-line torch.utils.data.DataLoader call with num_workers and
    pin_memory set; the site recorded is its first line."""
    script = HERE / "realworld" / "image_classifier.py"
    before = script.read_bytes()
    line = next(i for i, s in enumerate(before.decode().splitlines(), 1) if "DataLoader(" in s)
    p = loader_patch(before.decode(), "image_classifier.py", line, SETTINGS)
    assert script.read_bytes() == before
    after = _apply(tmp_path, "image_classifier.py", before.decode(), p)
    assert "num_workers=2" in after and "pin_memory=True" in after and "args.workers" not in after
    compile(after, "image_classifier.py", "exec")
    shutil.copy(script, tmp_path / "orig.py")
    assert (tmp_path / "orig.py").read_bytes() == before


@pytest.mark.parametrize("path,source,line,settings", [
    ("../t.py", "DataLoader(ds)\n", 1, SETTINGS),
    ("/etc/t.py", "DataLoader(ds)\n", 1, SETTINGS),
    ("t\n.py", "DataLoader(ds)\n", 1, SETTINGS),
    ("t.py", "loader = make(ds)\n", 1, SETTINGS),
    ("t.py", "DataLoader(ds\n", 1, SETTINGS),
    ("t.py", "DataLoader(ds)\n", 1, {"num_workers": object()}),
    ("t.py", "DataLoader(ds)\n", 1, {"not a name": 1}),
])
def test_bad_input_is_one_patch_error(path, source, line, settings):
    with pytest.raises(PatchError):
        loader_patch(source, path, line, settings)


def test_a_setting_passed_by_position_is_changed_in_place_never_added_again(tmp_path):
    """DataLoader(ds, 4, True) passes batch_size by position: a batch_size= keyword beside it is a TypeError
    (got multiple values for argument 'batch_size')."""
    src = "loader = DataLoader(ds, 4, True, None, None, 0)\n"
    p = loader_patch(src, "t.py", 1, {"batch_size": 8, "num_workers": 2, "pin_memory": True})
    after = _apply(tmp_path, "t.py", src, p)
    assert after == "loader = DataLoader(ds, 8, True, None, None, 2, pin_memory=True)\n"
    assert p.changed == (("batch_size", "4", "8"), ("num_workers", "0", "2"), ("pin_memory", None, "True"))
    with pytest.raises(PatchError, match=r"\*args"):
        loader_patch("DataLoader(ds, *rest)\n", "t.py", 1, {"num_workers": 2})


def test_every_loader_call_on_the_line_is_patched_and_shown():
    src = "train, val = DataLoader(a, batch_size=4), DataLoader(b, 4)\n"
    p = loader_patch(src, "t.py", 1, {"batch_size": 8, "num_workers": 2})
    assert p.calls == 2
    assert p.call == "DataLoader(a, batch_size=8, num_workers=2); DataLoader(b, 8, num_workers=2)"
    assert p.after == "train, val = DataLoader(a, batch_size=8, num_workers=2), DataLoader(b, 8, num_workers=2)\n"


def test_torchs_defaults_are_left_out_unless_the_call_sets_another_value():
    p = loader_patch("DataLoader(ds)\n", "t.py", 1,
                     {"num_workers": 2, "prefetch_factor": 2, "pin_memory": False, "batch_size": 1})
    assert p.after == "DataLoader(ds, num_workers=2)\n"
    p = loader_patch("DataLoader(ds, batch_size=16, prefetch_factor=4)\n", "t.py", 1,
                     {"num_workers": 2, "prefetch_factor": 2, "batch_size": 1})
    assert p.after == "DataLoader(ds, batch_size=1, prefetch_factor=2, num_workers=2)\n"
