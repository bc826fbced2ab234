"""Loader sites name the user's own line, with a path, never a library's; perfcore's own code is told
apart by the package's location, not by a folder called perfcore. Each loader is labelled train or
eval by what happens around its batches, and keeps its own figures."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_step_sources import FakeIter, FakeLoader

from perfcore.run.child.loaders import Loaders

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def marked_line(script: Path, mark: str) -> int:
    return next(i for i, t in enumerate(script.read_text().splitlines(), 1) if mark in t)


def run_library_script(tmp_path, name: str, *args: str):
    checkout = tmp_path / "perfcore"  # a user's project cloned as .../perfcore
    checkout.mkdir()
    script = checkout / "train.py"
    shutil.copy(SCRIPTS / name, script)
    # The library, and this checkout's perfcore (the child imports it from the path too).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SCRIPTS / "site-packages"), str(SCRIPTS.parents[1])]))
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--explain", "--out", str(out), "--warmup", "1",
                        "--",
                        sys.executable, str(script), *args], capture_output=True, text=True, env=env, timeout=300,
                       cwd=checkout)
    assert p.returncode == 0, p.stderr
    return script, p, json.loads((out / "run.json").read_text())


def test_loaders_made_inside_a_library_name_the_users_line_from_a_folder_named_perfcore(tmp_path):
    script, p, doc = run_library_script(tmp_path, "library_train_eval.py", "--steps", "16", "--train-delay", "0",
                                        "--eval-delay", "0", "--remake")
    assert doc["steps"] + doc["warmup_steps"] == 16
    # Run from the checkout: the path relative to it, which is the file's name here. The loader the
    # library made again over the train dataset is still the one made at the user's line, with the
    # same settings: one entry, made twice, with the batches the second one gave.
    train_site, eval_site = (f"train.py:{marked_line(script, m)}" for m in ("TRAIN_SITE", "EVAL_SITE"))
    assert [ld["site"] for ld in doc["loaders"]] == [train_site, eval_site]
    assert doc["loaders"][0]["made"] == 2 and doc["loaders"][0]["batches"] == 16
    assert "__init__.py" not in p.stderr  # the library's own line is never the advice's site


def test_a_train_and_an_eval_loader_made_by_a_library_are_told_apart_and_keep_their_figures(tmp_path):
    # An eval batch takes 8x longer to make than a train batch; the loop is load-bound on the train loader.
    script, p, doc = run_library_script(tmp_path, "library_train_eval.py", "--steps", "24", "--eval-every", "6",
                                        "--train-delay", "0.0005", "--eval-delay", "0.004")
    train_site = f"train.py:{marked_line(script, 'TRAIN_SITE')}"
    eval_site = f"train.py:{marked_line(script, 'EVAL_SITE')}"
    by_site = {ld["site"]: ld for ld in doc["loaders"]}
    assert set(by_site) == {train_site, eval_site}
    train, ev = by_site[train_site], by_site[eval_site]
    assert (train["role"], ev["role"]) == ("train", "eval")
    assert train["batches"] == 24 and ev["batches"] == 4 * 2  # 4 passes over 2 batches
    # Each loader's own time to make a batch: sleeps of 8 x 0.5 ms against 8 x 4 ms.
    assert 4.0 <= train["worker_batch_ms"] < ev["worker_batch_ms"] and ev["worker_batch_ms"] >= 32.0
    # The run's loader figures and its plan are the train loader's alone.
    assert doc["workers"]["batches"] == 24
    assert doc["workers"]["fetch_ms_mean"] == pytest.approx(train["worker_batch_ms"])
    assert doc["loader_plan"]["worker_batch_ms"] == pytest.approx(train["worker_batch_ms"])
    from run_docs import run_of_json

    from perfcore.report.words.advice import text_of

    run = run_of_json(doc)
    load_advice = text_of(next(f for f in run.findings if f.cause == "load"), run.loader_plan)
    assert train_site in load_advice and eval_site not in load_advice
    assert f"eval at {eval_site}" in p.stderr and f"train at {train_site}" in p.stderr


class Loop:
    """What the instrumentation reports around each batch: training (grad on, train mode), steps."""

    def __init__(self):
        self.training, self.steps = True, 0

    def __call__(self):
        return self.training, self.steps


def epoch(loaders, loader, loop, batches, step_every=0, grad=True):
    rec = loaders.epoch_started(loader, 0, grad_enabled=grad)
    it = FakeIter()
    loaders.watch_first_batch(it, rec)
    for k in range(1, batches + 1):
        it._next_data()
        if step_every and k % step_every == 0:
            loop.steps += 1
    return it


def roles(loaders):
    return [ld["role"] for ld in loaders.summary("/nonexistent")]


def test_a_loader_is_train_when_a_step_comes_between_its_batches():
    loop = Loop()
    loaders = Loaders(lambda: 0, loop)
    train = FakeLoader(0, False)
    loaders.made(train, "train.py:1")
    it = FakeIter()
    rec = loaders.epoch_started(train, 0, grad_enabled=True)
    loaders.watch_first_batch(it, rec)
    # A prefetching trainer (Lightning) asks for two batches before its first step ends.
    it._next_data()
    it._next_data()
    assert "_next_data" in vars(it) and roles(loaders) == ["train"]  # grad on, train mode so far
    loop.steps += 1
    it._next_data()  # a step came between two of its batches: decided, the watch goes away
    assert "_next_data" not in vars(it) and roles(loaders) == ["train"]


def test_a_loader_is_eval_under_no_grad_or_model_eval_or_with_no_step_between_its_batches():
    loop = Loop()
    loaders = Loaders(lambda: 0, loop)
    no_grad, in_eval, sloppy, train = FakeLoader(0, False), FakeLoader(0, False), FakeLoader(0, False), FakeLoader(0, False)
    for i, ld in enumerate((no_grad, in_eval, sloppy, train)):
        loaders.made(ld, f"train.py:{i}")
    epoch(loaders, train, loop, 6, step_every=1)
    epoch(loaders, no_grad, loop, 4, grad=False)
    loop.training = False  # model.eval() with grad still on
    it = epoch(loaders, in_eval, loop, 4)
    assert "_next_data" not in vars(it)  # told at its first batch
    loop.training = True
    epoch(loaders, sloppy, loop, 5)  # grad on, train mode, but never a step between its batches
    assert roles(loaders) == ["eval", "eval", "eval", "train"]
    assert [ld["training"] for ld in loaders.summary("/nonexistent")] == [False, False, False, True]
    assert loaders.training_batches() == 6


def test_without_any_step_in_the_run_a_loader_under_grad_stays_train():
    loop = Loop()
    loaders = Loaders(lambda: 0, loop)
    ld = FakeLoader(0, False)
    loaders.made(ld, "infer.py:3")
    epoch(loaders, ld, loop, 5)
    assert roles(loaders) == ["train"]  # no step anywhere: nothing says it is an evaluation


def test_each_loaders_batches_are_timed_apart_in_the_main_process(tmp_path):
    from perfcore.run.child.batches import BatchLines

    lines = BatchLines(rank=None)
    # (t0, t1, collate_ns, items, loader): loader 0's batches take 2 ms, loader 1's 9 ms.
    lines.main_fetches += [(0, 2_000_000, 0, 8, 0), (0, 9_000_000, 0, 8, 1), (5, 2_000_005, 0, 8, 0)]
    lines.flush(tmp_path)
    loaders = Loaders(lambda: 0, Loop())
    loaders.made(FakeLoader(0, False), "train.py:1")
    loaders.made(FakeLoader(0, False), "train.py:2")
    a, b = loaders.summary(tmp_path / "workers")
    assert a["worker_batch_ms"] == pytest.approx(2.0) and b["worker_batch_ms"] == pytest.approx(9.0)


def test_a_loader_made_every_step_is_one_entry_counted(tmp_path):
    # next(iter(DataLoader(...))) each step: one loader in the code, made 300 times. The run keeps
    # one entry per site and settings (it kept 3,000 entries, 900 KB of run.json, for 3,000 steps).
    script = SCRIPTS / "loader_per_step.py"
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--quiet", "--out", str(out), "--warmup", "1",
                        "--", sys.executable, str(script), "300"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] + doc["warmup_steps"] == 300
    sites = [ld["site"] for ld in doc["loaders"]]
    assert len(sites) == 2, sites  # the per-step loader and the evaluation loader
    per_step, evaluation = doc["loaders"]
    assert per_step["made"] == 300 and per_step["batches"] == 300 and per_step["role"] == "train"
    assert evaluation["made"] == 1 and evaluation["role"] == "eval" and evaluation["batch_size"] == 64


def test_loaders_past_the_cap_join_their_sites_entry():
    loaders = Loaders(lambda: 0, Loop())
    made = []
    for bs in range(1, 200):  # a batch size that changes every step: new settings each time
        ld = FakeLoader(0, False)
        ld.batch_size = bs
        made.append(ld)
        loaders.made(ld, "train.py:7")
    loaders.made(FakeLoader(0, False), "other.py:3")
    assert len(loaders.records) == 64
    assert sum(r["made"] for r in loaders.records) == 200
    assert loaders.records[0]["folded"] == 199 - 64 and loaders.records[-1]["folded"] == 1 and loaders.records[-1]["site"] == "train.py:7"
