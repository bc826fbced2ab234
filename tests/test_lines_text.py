"""The terminal's host-lines and starvation lines, from hand-built documents."""
from __future__ import annotations

from perfcore.report.lines_text import lines_text, where


def _doc(label="host", starved=0, file="/p/train.py"):
    fn = {"file": file, "function": "per_sample_metrics", "line": 31, "ms_per_step": 2.9, "share": 0.725,
          "samples": 40, "user": True}
    return {"verdict": {"causes": [{"label": label}]},
            "lines": {"labels": [{"label": "host", "ms_per_step": 4.0, "samples": 55, "functions": [fn],
                                  "lines": [{**fn, "calls": [{"method": "item", "per_step": 410.0}]}]}]},
            "starvation": {"steps": 50, "starved": starved, "share": starved / 50, "threshold_ms": 0.5,
                           "p50_wait_ms": 20.0, "p95_wait_ms": 53.0, "longest_run": 4, "longest_run_first_step": 7}}


def test_a_host_bound_run_names_the_function_line_and_calls():
    assert lines_text(_doc(), cwd="/p") == [
        "  try: per_sample_metrics at train.py:31: 2.90 ms of 4.00 ms host a step (72%, 55 samples), "
        "410 `.item()` calls a step"]


def test_the_labels_ms_are_the_breakdowns_and_the_function_gets_its_share_of_them():
    doc = {**_doc(), "breakdown_ms": {"host": 8.0}}
    assert lines_text(doc, cwd="/p")[0].startswith("  try: per_sample_metrics at train.py:31: 5.80 ms of 8.00 ms host")


def test_other_verdicts_get_no_lines_and_starvation_shows_only_when_steps_waited():
    assert lines_text(_doc("compute"), cwd="/p") == []
    got = lines_text(_doc("compute", starved=28), cwd="/p")
    assert got == ["  loader starved on 56% of steps (28 of 50, waits over 500 µs): p50 wait 20.0 ms, p95 53.0 ms, "
                   "longest run 4 steps from step 7"]


def test_paths_outside_the_folder_stay_whole_and_control_characters_never_print():
    assert where("/q/train.py", 3, cwd="/p") == "/q/train.py:3"
    text = lines_text(_doc(file="/p/evil\x1b[2Jname.py"), cwd="/p")[0]
    assert "\x1b" not in text and "evil?[2Jname.py:31" in text


def test_compute_facts_say_the_optimizer_change_and_the_heavy_backward():
    doc = {"compute_facts": {"optimizer": {"snippet": "torch.optim.AdamW(..., fused=True)", "share": 0.54,
                                           "optimizer_ms": 9.6, "keyword": "fused", "saved_ms": [7.0, 9.1],
                                           "measured": True},
                             "backward": {"ratio": 4.2, "backward_ms": 8.4, "forward_ms": 2.0, "excess_ms": 4.4,
                                          "likely": ["activation_checkpointing", "backward_hooks"]}}}
    opt, bwd = lines_text(doc)
    assert opt == ("  try: torch.optim.AdamW(..., fused=True): the optimizer is 54% of the step (9.60 ms); "
                   "its fused form saves 7.00 ms-9.10 ms a step")
    assert bwd.startswith("  backward is 4.2x forward (8.40 ms against 2.00 ms; ~2x is usual, 4.40 ms a step above it)")
    assert "activation checkpointing" in bwd


def test_the_sweep_patch_lines():
    from perfcore.report.lines_text import patch_text

    p = {"status": "written", "patch": "dataloader.patch", "at": "train.py:42",
         "call": "DataLoader(ds, num_workers=2, pin_memory=True)", "through_kwargs": False}
    assert patch_text(p, "sweep1") == ["  change at train.py:42: DataLoader(ds, num_workers=2, pin_memory=True)",
                                       "  git apply sweep1/dataloader.patch"]
    assert patch_text({"status": "unchanged", "reason": "the best configuration is the script's own"}) == \
        ["  no DataLoader patch: the best configuration is the script's own"]
    assert patch_text(None) == []
