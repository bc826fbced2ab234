"""The terminal's host-lines and starvation lines, from hand-built documents."""

from __future__ import annotations

from run_docs import as_run

from perfcore.report.words.findings import lines_text as _lines_text
from perfcore.report.words.findings import where


def lines_text(doc: dict, cwd: str | None = None) -> list[str]:
    return _lines_text(as_run(doc), cwd)


def _call(method: str, per_step: float, total: int = 0, **at) -> dict:
    """A counted call at a line, as run.json keeps one (the line it was counted at is the row's)."""
    return {"file": "/p/main.py", "function": "f", "line": 1, "method": method, "per_step": per_step, "total": total, **at}


def _doc(label="host", starved=0, file="/p/train.py"):
    fn = {
        "file": file,
        "function": "per_sample_metrics",
        "line": 31,
        "ms_per_step": 2.9,
        "share": 0.725,
        "samples": 40,
        "user": True,
    }
    return {
        "verdict": {"causes": [{"label": label}]},
        "lines": {
            "labels": [
                {
                    "label": "host",
                    "ms_per_step": 4.0,
                    "samples": 55,
                    "functions": [fn],
                    "lines": [{**fn, "calls": [_call("item", 410.0)]}],
                }
            ],
            "steps": 50,
            "samples": 55,
            "interval_ms": 1.0,
        },
        "starvation": {
            "steps": 50,
            "starved": starved,
            "share": starved / 50,
            "threshold_ms": 0.5,
            "p50_wait_ms": 20.0,
            "p95_wait_ms": 53.0,
            "longest_run": 4,
            "longest_run_first_step": 7,
            "load_ms_per_step": 12.0,
        },
    }


def test_a_host_bound_run_names_the_function_line_and_calls():
    assert lines_text(_doc(), cwd="/p") == [
        "  try: per_sample_metrics at train.py:31: 2.90 ms a step (72% of host); "
        "410 `.item()` a step: keep on device, read every N steps"
    ]


def test_the_labels_ms_are_the_breakdowns_and_the_function_gets_its_share_of_them():
    doc = {**_doc(), "breakdown_ms": {"host": 8.0}}
    assert lines_text(doc, cwd="/p")[0].startswith(
        "  try: per_sample_metrics at train.py:31: 5.80 ms a step (72% of host"
    )


def test_other_verdicts_get_no_lines_and_starvation_shows_only_when_steps_waited():
    assert lines_text(_doc("compute"), cwd="/p") == []
    got = lines_text(_doc("compute", starved=28), cwd="/p")
    assert got == [
        "  steps that waited on the loader: 56% (28 of 50, waits over 500 µs): their p50 wait 20.0 ms, p95 53.0 ms, "
        "longest run 4 steps from step 7"
    ]


def test_paths_outside_the_folder_stay_whole_and_control_characters_never_print():
    assert where("/q/train.py", 3, cwd="/p") == "/q/train.py:3"
    text = lines_text(_doc(file="/p/evil\x1b[2Jname.py"), cwd="/p")[0]
    assert "\x1b" not in text and "evil?[2Jname.py:31" in text


def test_compute_facts_say_the_optimizer_change_and_the_heavy_backward():
    doc = {
        "compute_facts": {
            "optimizer": {
                "optimizer": "torch.optim.AdamW",
                "device": "cuda",
                "step_ms": 17.8,
                "snippet": "torch.optim.AdamW(..., fused=True)",
                "share": 0.54,
                "optimizer_ms": 9.6,
                "keyword": "fused",
                "saved_ms": [7.0, 9.1],
                "measured": True,
            },
            "backward": {
                "ratio": 4.2,
                "backward_ms": 8.4,
                "forward_ms": 2.0,
                "excess_ms": 4.4,
                "likely": ["activation_checkpointing", "backward_hooks"],
                "step_ms": 17.8,
            },
        }
    }
    opt, bwd = lines_text(doc)
    assert opt == (
        "  try: torch.optim.AdamW(..., fused=True): saves 7.00 ms-9.10 ms a step (optimizer 9.60 ms, 54%)"
    )
    # Made at the user's line: the try line names it, and its figures give way to the width first.
    at = {**doc["compute_facts"]["optimizer"], "site": "src/project/train_model.py:128"}
    (opt_at, _) = lines_text({**doc, "compute_facts": {**doc["compute_facts"], "optimizer": at}})
    assert opt_at == "  try: src/project/train_model.py:128: torch.optim.AdamW(..., fused=True): saves 7.00 ms-9.10 ms a step"
    assert bwd.startswith("  backward is 4.2x forward (8.40 ms against 2.00 ms; ~2x is usual, 4.40 ms a step above it)")
    assert "activation checkpointing" in bwd


def test_the_sweep_patch_lines():
    from perfcore.report.words.findings import patch_text

    p = {
        "status": "written",
        "patch": "dataloader.patch",
        "at": "train.py:42",
        "call": "DataLoader(ds, num_workers=2, pin_memory=True)",
        "through_kwargs": False,
    }
    assert patch_text(p, "sweep1") == [
        "  change at train.py:42: DataLoader(ds, num_workers=2, pin_memory=True)",
        "  git apply sweep1/dataloader.patch",
    ]
    # A folder with a space: the line pastes into a shell as it reads.
    assert patch_text(p, "/tmp/my runs/sweep1")[1] == "  git apply '/tmp/my runs/sweep1/dataloader.patch'"
    said = ["  no DataLoader patch: the best configuration is the script's own"]
    assert patch_text({"status": "unchanged", "reason": "own_is_best"}) == said
    assert patch_text({"status": "unchanged", "reason": "the best configuration is the script's own"}) == said  # old
    assert patch_text(None) == []


def _host(lines, samples, functions=None, breakdown=0.270, **doc):
    # A host label from (file, function, line, share, samples) rows, most time first; the functions are
    # their lines summed, as join_lines gives them.
    rows = [
        {
            "file": "/p/main.py",
            "function": fn,
            "line": ln,
            "ms_per_step": sh * breakdown,
            "share": sh,
            "samples": k,
            "user": True,
            "calls": [_call(**c) for c in calls],
        }
        for fn, ln, sh, k, calls in lines
    ]
    if functions is None:
        acc = {}
        for r in rows:
            a = acc.setdefault(r["function"], {**r, "share": 0.0, "samples": 0})
            a["share"] += r["share"]
            a["samples"] += r["samples"]
        functions = sorted(acc.values(), key=lambda f: -f["share"])
    return {
        "verdict": {"causes": [{"label": "host"}]},
        "breakdown_ms": {"host": breakdown},
        "lines": {
            "labels": [
                {"label": "host", "ms_per_step": breakdown, "samples": samples, "functions": functions, "lines": rows}
            ],
            "steps": 40,
            "samples": samples,
            "interval_ms": 1.0,
        },
        **doc,
    }


def test_five_samples_of_module_level_code_say_few_samples_and_give_no_time():
    """The regression example: 2 samples at line 60 and one each at 49, 52 and a listcomp of 5 host samples.
    The module's 4 samples are not line 60's time, and 5 samples size nothing."""
    doc = _host(
        [
            ("<module>", 60, 0.44, 2, []),
            ("<module>", 49, 0.21, 1, []),
            ("<module>", 52, 0.18, 1, []),
            ("<listcomp>", 16, 0.17, 1, []),
        ],
        samples=5,
    )
    (got,) = lines_text(doc, cwd="/p")
    # A caveat with no change to make at the line: a note, never a try line.
    assert got.startswith("  note: <module> at main.py:49-60: too few samples to time it (4 of 5 host; a time needs 6")
    assert "µs" not in got and " ms" not in got and "main.py:60:" not in got


def test_few_samples_with_counted_calls_keep_the_calls_action_within_the_width():
    # The regression trial: 5 samples size nothing, but its `.item()` each step is still the change to make.
    item = [{"method": "item", "per_step": 1.0, "total": 438}]
    doc = _host([("<module>", 60, 0.44, 2, item), ("<module>", 49, 0.21, 1, []), ("<module>", 52, 0.35, 2, [])], 5)
    (got,) = lines_text(doc, cwd="/p")
    assert (
        got
        == "  try: <module> at main.py:49-60: too few samples to time it; 1 `.item()` a step: keep on device, read every N steps"
    )
    assert len(got.strip()) <= 120


def test_a_function_spread_over_its_lines_gets_its_total_under_its_name_and_span():
    # 8 lines of 10% each over 60 samples: no line is sized (a 10% share needs 144), the function's 80% is.
    doc = _host(
        [("sgd_update", 55 + i, 0.10, 6, []) for i in range(8)] + [("main", 12, 0.20, 12, [])],
        samples=60,
        breakdown=10.0,
    )
    (got,) = lines_text(doc, cwd="/p")
    assert got == ("  try: speed up sgd_update at main.py:55-62: 8.00 ms a step (80% of host; no one line stands out)")


def test_a_sized_line_gets_its_own_time_not_its_functions():
    doc = _host(
        [("metrics", 31, 0.60, 60, []), ("metrics", 33, 0.30, 30, []), ("main", 9, 0.10, 10, [])],
        samples=100,
        breakdown=10.0,
    )
    (got,) = lines_text(doc, cwd="/p")
    assert got == "  try: speed up metrics at main.py:31: 6.00 ms a step (60% of host)"


def test_calls_under_one_a_step_are_not_printed():
    rare = [{"method": "numpy", "per_step": 64.0}, {"method": "item", "per_step": 0.018}]
    (got,) = lines_text(_host([("train", 38, 1.0, 39, rare)], samples=39), cwd="/p")
    assert "`.item()`" not in got and "0 `" not in got
    assert got.endswith("64 `.numpy()` a step")  # not a syncing read: no device change is claimed


def test_load_time_in_the_loops_for_line_points_at_the_dataloader_and_its_settings():
    doc = _host(
        [("train", 38, 1.0, 39, [{"method": "numpy", "per_step": 64.0}])],
        samples=39,
        breakdown=7.67,
        loaders=[
            {"site": "main.py:125", "num_workers": 0, "training": False, "batches": 2},
            {"site": "main.py:124", "num_workers": 0, "training": True, "batches": 60},
        ],
    )
    doc["verdict"]["causes"][0]["label"] = "load"
    doc["breakdown_ms"] = {"load": 7.67}
    doc["lines"]["labels"][0]["label"] = "load"
    (got,) = lines_text(doc, cwd="/p")
    assert got == (
        "  try: DataLoader at main.py:124 (num_workers=0): 7.67 ms a step (100% of load) "
        "waiting; add workers"
    )
    # The loader plan ruled workers out (no core free, or a trial measured them no faster): the line says
    # the plan's change, never "add workers" beside a plan that says workers would not help.
    for kind in ("no_free_core", "cheaper_fetch", "measured_no_help"):
        doc["loader_plan"] = {"kind": kind}
        (ruled_out,) = lines_text(doc, cwd="/p")
        assert "cheaper batches, not workers" in ruled_out and "workers;" not in ruled_out and "add workers" not in ruled_out
    doc["loader_plan"] = {"kind": "persistent_workers"}
    assert lines_text(doc, cwd="/p")[0].endswith("set persistent_workers=True")
    doc.pop("loader_plan")
    # A Dataset's own method is where the batch is made: that line is named, not the loader.
    doc["lines"]["labels"][0]["lines"][0]["function"] = "__getitem__"
    doc["lines"]["labels"][0]["functions"][0]["function"] = "__getitem__"
    assert lines_text(doc, cwd="/p")[0].startswith("  try: __getitem__ at main.py:38: 7.67 ms")


def test_a_line_that_only_calls_into_a_library_names_where_in_the_library_the_time_went():
    """An HF Trainer run: the script's trainer.train() line held 100% of host time, which says nothing;
    the try line says how much of host is in which of transformers' functions, at its file and line."""
    doc = _host([("<module>", 40, 1.0, 400, [])], samples=400)
    row = doc["lines"]["labels"][0]["lines"][0]
    at = ["/v/lib/python3.11/site-packages/transformers/trainer.py", "_maybe_log_save_evaluate", 3100]
    row.update(inside=at, inside_share=0.97)
    (got,) = lines_text(doc, cwd="/p")
    assert got.strip() == "try: main.py:40: 97% of host is in transformers' _maybe_log_save_evaluate (trainer.py:3100)"
    # Fewer than one counted call a step is not shown, nor what holds the time (the HF trial: 0.43 .item()).
    row["calls"] = [_call("item", 0.43)]
    assert "transformers' _maybe_log_save_evaluate" in lines_text(doc, cwd="/p")[0]
    # Counted syncing calls at the line are its change: said as before.
    row["calls"] = [_call("item", 4.0)]
    assert "`.item()` a step" in lines_text(doc, cwd="/p")[0]


def test_the_brief_names_a_folder_with_a_space_as_a_shell_reads_it(tmp_path):
    """`perfcore run --out "runs/out sp"` printed "perfcore report runs/out sp --explain", which a shell
    reads as two arguments."""
    import shlex

    from run_docs import typed_run

    from perfcore.report.terminal import render_brief

    folder = tmp_path / "out sp"
    r = typed_run(10.0, {"compute": 9.0, "host": 1.0})
    (line,) = [ln for ln in render_brief(r, folder).splitlines() if "all evidence" in ln]
    assert shlex.split(line.split("all evidence: ")[1]) == ["perfcore", "report", str(folder), "--explain"]
