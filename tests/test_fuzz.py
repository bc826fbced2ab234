"""Bad input of every kind ends in one line on stderr and an exit code, never a traceback, and changes
nothing outside the folder a command was pointed at. Random and truncated result files go through
the readers (report, compare, merge), random text through every numeric option (hypothesis), and a
catalogue of the mistakes users make is checked case by case."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from run_docs import write_run_folder

from perfcore import capabilities
from perfcore.cli import cli

# Derandomized: the same examples on every run, so CI cannot pass once and fail the next time.
FUZZ = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class Sandbox:
    """An empty working folder (where a stray default folder would appear) and a pristine run folder A."""

    def __init__(self, root: Path):
        self.root = root
        self.cwd = root / "cwd"
        self.cwd.mkdir()
        self.a = write_run_folder(root / "a", steps=6)
        self.a_files = snapshot(self.a)
        self.n = 0

    def fresh_b(self, run_json: bytes | None = None, steps_csv: bytes | None = None) -> Path:
        self.n += 1
        b = self.root / f"b{self.n}"
        shutil.copytree(self.a, b)
        if run_json is not None:
            (b / "run.json").write_bytes(run_json)
        if steps_csv is not None:
            (b / "steps.csv").write_bytes(steps_csv)
        return b

    def invoke(self, args: list[str], may_write: Path | None = None) -> "object":
        outside = {p: snapshot(p) for p in (self.a, self.cwd)}
        before_b = snapshot(may_write) if may_write else None
        old = os.getcwd()
        os.chdir(self.cwd)
        try:
            res = CliRunner().invoke(cli, args, prog_name="perfcore")
        finally:
            os.chdir(old)
        assert_one_line(res, args)
        for p, files in outside.items():
            assert snapshot(p) == files, f"{args} changed {p}"
        if may_write is not None:
            after = snapshot(may_write)
            changed = {k for k in set(after) | set(before_b) if after.get(k) != before_b.get(k)}
            assert changed <= {"breakdown.png"}, f"{args} changed {changed}"
        return res


def assert_one_line(res, args) -> None:
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, repr(res.exception))
    assert "Traceback" not in res.output + res.stderr, args
    assert "internal error" not in res.stderr, (args, res.stderr)
    if res.exit_code != 0:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1, (args, res.stderr)
        assert lines[0].startswith("perfcore"), (args, lines)
        assert res.exit_code in (1, 2, 3), (args, res.exit_code)


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    return Sandbox(tmp_path_factory.mktemp("fuzz"))


def bad_run_json_exit(res) -> None:
    # A damaged file named on the command line is a bad argument: 2.
    assert res.exit_code in (0, 2), res.stderr


@FUZZ
@given(cut=st.floats(min_value=0, max_value=1, exclude_max=True))
def test_truncated_run_json(box, cut):
    raw = (box.a / "run.json").read_bytes().rstrip()  # cut anywhere before the closing brace
    b = box.fresh_b(run_json=raw[: int(cut * len(raw))])
    res = box.invoke(["compare", str(box.a), str(b)])
    assert res.exit_code == 2 and str(b / "run.json") in res.stderr, res.stderr


@FUZZ
@given(data=st.binary(max_size=200))
def test_random_bytes_as_run_json(box, data):
    res = box.invoke(["compare", str(box.a), str(box.fresh_b(run_json=data))])
    bad_run_json_exit(res)


@FUZZ
@given(key=st.sampled_from(sorted(json.loads(json.dumps(__import__("run_docs").run_doc_and_steps()[0], default=str)))),
       value=json_values, delete=st.booleans())
def test_a_top_level_field_replaced_or_removed(box, key, value, delete):
    doc = json.loads((box.a / "run.json").read_text())
    if delete:
        doc.pop(key)
    else:
        doc[key] = value
    res = box.invoke(["compare", str(box.a), str(box.fresh_b(run_json=json.dumps(doc).encode()))])
    bad_run_json_exit(res)


@FUZZ
@given(path=st.sampled_from([("step_time_ms", "mean"), ("step_time_ms", "p90"), ("breakdown_ms", "load"),
                             ("breakdown_fraction", "compute"), ("verdict", "summary"), ("verdict", "bound")]),
       value=json_values)
def test_a_nested_field_replaced(box, path, value):
    doc = json.loads((box.a / "run.json").read_text())
    doc[path[0]][path[1]] = value
    res = box.invoke(["compare", str(box.a), str(box.fresh_b(run_json=json.dumps(doc).encode()))])
    bad_run_json_exit(res)


@FUZZ
@given(schema=st.one_of(st.text(max_size=20), st.integers(0, 99).map(lambda v: f"perfcore.run/{v}"),
                        st.sampled_from(["perfcore.sweep/1", "perfcore.run/3", "perfcore.run/", "perfcore.run/1x"])))
def test_other_schemas_and_versions(box, schema):
    doc = json.loads((box.a / "run.json").read_text())
    doc["schema"] = schema
    res = box.invoke(["compare", str(box.a), str(box.fresh_b(run_json=json.dumps(doc).encode()))])
    # Older versions go through the one migration (a current document read as an older one says less, and
    # reads); a newer one is refused by name.
    readable = ("perfcore.run/0", "perfcore.run/1", "perfcore.run/2")
    assert res.exit_code == (0 if schema in readable else 2), (schema, res.stderr)
    if schema.startswith("perfcore.run/") and schema[13:].isdigit() and int(schema[13:]) > 2:
        assert "newer perfcore" in res.stderr


@settings(FUZZ, max_examples=40)
@given(cut=st.floats(min_value=0, max_value=1, exclude_max=True), cell=st.one_of(st.none(), st.text(max_size=6)),
       which=st.integers(0, 10**6))
def test_truncated_or_damaged_steps_csv(box, cut, cell, which):
    lines = (box.a / "steps.csv").read_text().splitlines()
    if cell is None:
        raw = "\n".join(lines).encode()[: int(cut * len("\n".join(lines)))]
    else:
        rows = [ln.split(",") for ln in lines]
        r = 1 + which % (len(rows) - 1)
        c = which % len(rows[r])
        rows[r][c] = cell
        raw = "\n".join(",".join(x) for x in rows).encode()
    b = box.fresh_b(steps_csv=raw)
    res = box.invoke(["report", str(b)], may_write=b)
    assert res.exit_code in (0, 2), res.stderr


NUMERIC_OPTIONS = [
    # (command line with {} for the value): the target is bad on purpose, so a valid value ends in
    # that one-line error instead of starting real work.
    ["health", "--steps", "{}", "/nonexistent/w.py:make"],
    ["health", "--interval", "{}", "/nonexistent/w.py:make"],
    ["diagnose", "--warmup", "{}", "/nonexistent/w.py:make"],
    ["sweep", "--batch-size", "{}", "/nonexistent/w.py:make"],
    ["sweep", "--num-workers", "{}", "/nonexistent/w.py:make"],
    ["sweep", "--prefetch-factor", "{}", "/nonexistent/w.py:make"],
    ["sweep", "--pin-memory", "{}", "/nonexistent/w.py:make"],
    ["sweep", "--budget", "{}", "/nonexistent/w.py:make"],
    ["run", "--steps", "{}", "--", "/nonexistent/python"],
    ["run", "--warmup", "{}", "--", "/nonexistent/python"],
    ["run", "--monitor", "{}", "--", "/nonexistent/python"],
    ["monitor", "--interval", "{}", "--", "/nonexistent/python"],
    ["compare", "--fail-above", "{}", "/nonexistent/a", "/nonexistent/b"],
    ["transfer", "--repeats", "{}"],
    ["transfer", "--sizes", "{}"],
    ["transfer", "--batch-shape", "{}"],
    ["graph", "--steps", "{}", "/nonexistent/w.py:make"],
]
number_words = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["nan", "inf", "-inf", "NaN", "-1", "0", "1e400", "0x10", "1_000", " 5", "5.5", "", "-0",
                     "1e-9", "10ms", "nanms", "infs", "0..1G", "4K..1K", "1,2,,3", "true,maybe", "9" * 40]),
    st.integers(min_value=-10**20, max_value=10**20).map(str), st.floats().map(str))


@settings(FUZZ, max_examples=300)
@given(line=st.sampled_from(NUMERIC_OPTIONS), value=number_words)
def test_numeric_options(box, line, value):
    args = [value if a == "{}" else a for a in line]
    res = box.invoke(args)
    assert res.exit_code != 0
    assert box.cwd.exists() and not any(box.cwd.iterdir()), "a bad input left a folder behind"


# The mistakes a user makes, each with what the one line must say. Counted in the report of this work.
CATALOGUE = [
    (["health", "--steps", "0", "demo"], 2, "--steps"),
    (["health", "--steps", "-1", "demo"], 2, "--steps"),
    (["health", "--steps", "abc", "demo"], 2, "not a whole number"),
    (["health", "--steps", "1.5", "demo"], 2, "not a whole number"),
    (["health", "--steps", "nan", "demo"], 2, "--steps"),
    (["health", "--interval", "nan", "demo"], 2, "--interval"),
    (["health", "--interval", "inf", "demo"], 2, "--interval"),
    (["health", "--interval", "0", "demo"], 2, "--interval"),
    (["health", "--interval", "-5ms", "demo"], 2, "--interval"),
    (["health", "--interval", "1us", "demo"], 2, "not a duration"),
    (["health", "demo", "extra"], 2, "unexpected"),
    (["health"], 2, "give a workload"),
    (["health", "nosuch_builtin"], 2, "nosuch_builtin"),
    (["health", "/nonexistent/w.py:make"], 2, "w.py"),
    (["diagnose", "--warmup", "-1", "demo"], 2, "--warmup"),
    (["diagnose", "--steps", "inf", "demo"], 2, "--steps"),
    (["sweep", "--batch-size", "0,8", "demo"], 2, "batch sizes must be > 0"),
    (["sweep", "--batch-size", "nan", "demo"], 2, "--batch-size"),
    (["sweep", "--batch-size", "8,,", "--num-workers", "x", "demo"], 2, "--num-workers"),
    (["sweep", "--num-workers", "-1", "demo"], 2, "--num-workers"),
    (["sweep", "--num-workers", "", "demo"], 2, "empty list"),
    (["sweep", "--prefetch-factor", "0", "demo"], 2, "prefetch factors must be > 0"),
    (["sweep", "--pin-memory", "maybe", "demo"], 2, "true/false"),
    (["sweep", "--budget", "0", "demo"], 2, "--budget"),
    (["sweep", "--budget", "nan", "demo"], 2, "--budget"),
    (["sweep", "--budget", "-3", "demo"], 2, "--budget"),
    (["sweep", "--resume", "demo"], 2, "--resume needs --out"),
    (["run"], 2, "COMMAND"),
    (["run", "--steps", "0", "--", "python", "x.py"], 2, "--steps"),
    (["run", "--warmup", "-2", "--", "python", "x.py"], 2, "--warmup"),
    (["run", "--monitor", "nan", "--", "python", "x.py"], 2, "--monitor"),
    (["run", "--", "/nonexistent/python"], 2, "no such command"),
    (["run", "--backend", "gpu9", "--", "python", "x.py"], 2, "--backend"),
    (["monitor", "--interval", "fast", "--", "true"], 2, "not a duration"),
    (["compare", "--fail-above", "nan", "A", "B"], 2, "--fail-above"),
    (["compare", "--fail-above", "inf", "A", "B"], 2, "--fail-above"),
    (["compare", "/nonexistent", "/nonexistent"], 2, "does not exist"),
    (["report", "/nonexistent"], 2, "does not exist"),
    (["report", "EMPTY"], 2, "no run.json"),
    (["merge", "EMPTY"], 2, "holds no perfcore parts"),
    (["transfer", "--repeats", "0"], 2, "--repeats"),
    (["transfer", "--sizes", "4K..1K"], 2, "runs backwards"),
    (["transfer", "--batch-shape", "1,-3"], 2, "shape"),
    (["transfer", "--direction", "sideways"], 2, "h2d and d2h"),
    (["env", "--json", "/nonexistent/dir/env.json"], 2, "does not exist"),
    (["env", "--json", "EMPTY"], 2, "is a directory"),
    (["nosuch"], 2, "No such command"),
    (["graph", "--steps", "-1", "demo"], 2, "--steps"),
    # `~` and relative paths: expanded once, for every path a command takes
    (["report", "~/no-such-perfcore-run"], 2, str(Path.home() / "no-such-perfcore-run")),
    (["compare", "~/no-such-a", "~/no-such-b"], 2, str(Path.home() / "no-such-a")),
    (["merge", "~/no-such-parts"], 2, str(Path.home() / "no-such-parts")),
    (["env", "--json=~/no-such-folder/env.json"], 2, str(Path.home() / "no-such-folder")),
    # the user's own files and folders given where perfcore expected something else
    (["health", "WL_FILE"], 2, "needs its function"),
    (["health", "WL_FILE:raises"], 2, "your raises() raised ValueError: my factory broke at"),
    (["health", "WL_FILE:takes_args"], 2, "with no arguments"),
    (["run", "--", "python", "DIR"], 2, "is a folder, not a script"),
    (["diagnose", "--", "python", "DIR"], 2, "is a folder, not a script"),
]


@pytest.mark.parametrize("args, code, says", CATALOGUE, ids=[" ".join(c[0])[:60] for c in CATALOGUE])
def test_catalogue_of_mistakes(box, args, code, says):
    empty = box.root / "empty"
    empty.mkdir(exist_ok=True)
    wl = box.root / "my_wl.py"
    wl.write_text("def raises():\n    raise ValueError('my factory broke')\n\n\ndef takes_args(size):\n    pass\n")
    named = {"EMPTY": str(empty), "A": str(box.a), "B": str(box.a), "DIR": str(empty), "WL_FILE": str(wl)}
    args = [named.get(a, a.replace("WL_FILE", str(wl))) for a in args]
    res = box.invoke(args)
    assert res.exit_code == code, (res.exit_code, res.stderr)
    assert says in res.stderr, res.stderr


# Commands and options that need hardware, on a machine without it: one line naming what is missing,
# exit 3 (GPU/CUPTI unavailable) and no folder left behind. The same class where a script or the API
# runs on (--backend, kernels=True, the default sweep's pin_memory) is in test_hostile_hardware.py.
NEEDS_A_GPU = [
    (["transfer"], 3, "perfcore transfer needs a CUDA GPU"),
    (["transfer", "--direction", "d2h", "--sizes", "1M"], 3, "perfcore transfer needs a CUDA GPU"),
    (["graph", "demo"], 3, "perfcore graph needs a CUDA GPU"),
    (["graph", "--steps", "3", "resnet18"], 3, "perfcore graph needs a CUDA GPU"),
]


@pytest.mark.skipif(capabilities()["features"]["cuda_events"], reason="what a machine without a GPU says")
@pytest.mark.parametrize("args, code, says", NEEDS_A_GPU, ids=[" ".join(c[0]) for c in NEEDS_A_GPU])
def test_what_needs_a_gpu_says_so_on_a_machine_without_one(box, args, code, says):
    res = box.invoke(args)
    assert res.exit_code == code, (res.exit_code, res.stderr)
    assert says in res.stderr and ("no CUDA device visible" in res.stderr or "CPU mode" in res.stderr), res.stderr


DAMAGED_FILES = [
    ("empty run.json", b"", None, "is empty"),
    ("half a run.json", b'{"schema": "perfcore.run/1", "steps": 3', None, "truncated"),
    ("not JSON", b"\x89PNG\r\n\x1a\n\x00\x00", None, "not text"),
    ("a JSON list", b"[1, 2]", None, "not a perfcore document"),
    ("another document", b'{"schema": "perfcore.sweep/1"}', None, "not perfcore.run"),
    ("a newer version", b'{"schema": "perfcore.run/7"}', None, "newer perfcore"),
    ("no schema", b'{"steps": 3}', None, "no schema"),
    ("empty steps.csv", None, b"", "is empty"),
    ("steps.csv without columns", None, b"a,b\n1,2\n", "has no column"),
    ("steps.csv cut mid-row", None, "CUT", "truncated"),
]


@pytest.mark.parametrize("what, run_json, steps_csv, says", DAMAGED_FILES, ids=[d[0] for d in DAMAGED_FILES])
def test_damaged_result_files_name_the_file(box, what, run_json, steps_csv, says):
    if steps_csv == "CUT":
        text = (box.a / "steps.csv").read_text()
        steps_csv = text[: text.rindex(",", 0, len(text) - 5)].encode()
    b = box.fresh_b(run_json=run_json, steps_csv=steps_csv)
    res = box.invoke(["report", str(b)], may_write=b)
    assert res.exit_code == 2 and says in res.stderr, res.stderr
    assert str(b / ("run.json" if run_json is not None else "steps.csv")) in res.stderr


def test_a_zero_step_baseline_is_refused_not_compared_as_zero(box, tmp_path):
    doc = json.loads((box.a / "run.json").read_text())
    doc["steps"], doc["step_time_ms"]["mean"] = 0, 0.0
    b = box.fresh_b(run_json=json.dumps(doc).encode())
    res = box.invoke(["compare", str(b), str(box.a)])
    assert res.exit_code == 2 and "no measured step" in res.stderr and "+0.0%" not in res.output


def test_fail_above_gates_a_regression_and_passes_an_equal_run(box, tmp_path):
    slow = write_run_folder(tmp_path / "slow", steps=6, load_ms=40.0)
    res = box.invoke(["compare", "--fail-above", "5", str(box.a), str(slow)])
    assert res.exit_code == 1 and "regression" in res.stderr
    assert box.invoke(["compare", "--fail-above", "5", str(box.a), str(box.a)]).exit_code == 0


def test_fail_above_trips_on_a_slowdown_held_in_the_outlier_steps(box, tmp_path):
    """B's steady steps equal A's while its mean is 40% slower (the outlier steps it set apart slowed): the
    reports quote the steady step, and the gate still fails, naming the mean and the steady change."""
    doc = json.loads((box.a / "run.json").read_text())
    steady, bd = doc["step_time_ms"]["mean"], doc["breakdown_ms"]
    doc["step_time_ms"]["mean"] = steady * 1.4
    doc["breakdown_robust"] = {"step_ms": steady, "ms": bd, "steps": doc["steps"], "kept_steps": doc["steps"] - 1,
                               "step_sem_ms": 0.01, "outliers": {"count": 1, "steps": [3]}}
    b = box.fresh_b(run_json=json.dumps(doc).encode())
    res = box.invoke(["compare", "--fail-above", "10", str(box.a), str(b)])
    assert res.exit_code == 1, res.stderr
    assert "regression: mean step time +40.0% > 10%" in res.stderr and "steady steps +0.0%" in res.stderr

def test_compare_html_writes_the_side_by_side_page(box, tmp_path):
    slow = write_run_folder(tmp_path / "slow", steps=6, load_ms=40.0)
    page = tmp_path / "cmp.html"
    res = box.invoke(["compare", "--html", str(page), str(box.a), str(slow)])
    assert res.exit_code == 0, res.stderr
    html = page.read_text()
    assert html.startswith("<!doctype html>") or html.lower().startswith("<!doctype html>"), html[:80]
    assert str(slow) in html and "load" in html


# Optional fields the report shows, of the wrong type or out of range: one line naming the field.
BAD_FIELDS = [
    ("outcome", [1, 2], "outcome is a list"),
    ("memory", {"peak_bytes": "lots"}, "memory.peak_bytes is text"),
    ("memory", {"peak_bytes": -5}, "not a count"),
    ("overhead", {"ms_per_step": -1.0, "fraction": 0.1, "per_phase_ns": 1}, "below zero"),
    ("exit", {"reason": 7}, "exit.reason"),
    ("startup", {"time_to_first_step_ms": "soon", "first_step_ms": 1}, "startup.time_to_first_step_ms"),
    ("breakdown_ms.compute", -50, "below zero"),
    ("breakdown_fraction.load", 7, "more than the whole"),
    ("steps", 1e30, "not a count"),
    ("step_time_ms.mean", -3.0, "below zero"),
]


@pytest.mark.parametrize("key, value, says", BAD_FIELDS, ids=[f"{k}={v!r}"[:40] for k, v, _ in BAD_FIELDS])
def test_optional_and_impossible_fields_are_refused_by_name(box, key, value, says):
    doc = json.loads((box.a / "run.json").read_text())
    head, _, leaf = key.partition(".")
    if leaf:
        doc[head][leaf] = value
    else:
        doc[head] = value
    b = box.fresh_b(run_json=json.dumps(doc).encode())
    res = box.invoke(["report", str(b)], may_write=b)
    assert res.exit_code == 2 and says in res.stderr, res.stderr
