"""Where a step ends, whatever the loop: the choice among optimizer, backward, batch and forward
(run/child/steps.py) on hand-made events, then `perfcore run` on unmodified scripts of each shape."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from perfcore.run.child.steps import SourceChosen, StepEnded, StepSources, with_eval_rows

SCRIPTS = Path(__file__).resolve().parent / "scripts"


class FakeInst:
    """What StepSources reads of the instrumentation (the timer, --steps), with a real StepTimer, and
    the owner's part: applying the events StepSources returns, as the instrumentation does."""

    def __init__(self, stop_at=10**9):
        from perfcore import StepTimer

        self.timer = StepTimer(device="cpu", warmup=0)
        self.stop_at = stop_at
        self.stopped_at = None
        self.eval_rows = []
        self.chosen = []

    def after_step(self, n):
        if n >= self.stop_at and self.stopped_at is None:  # the real one raises SystemExit here
            self.stopped_at = n

    def apply(self, events):
        engine = self.timer.engine
        for ev in events:
            if isinstance(ev, StepEnded):
                if engine.end_step(at_ns=ev.t_ns):
                    self.after_step(len(engine.boundaries))
            elif isinstance(ev, SourceChosen):
                self.chosen.append(ev.source)
                if ev.ends is not None:
                    engine.set_boundaries(ev.ends)
                if ev.upkeep:
                    self.after_step(len(engine.boundaries))


class Driven:
    """A StepSources whose events its FakeInst applies at once."""

    def __init__(self, inst, forced):
        self.inst, self.src = inst, StepSources(inst, forced)

    def __getattr__(self, name):
        return getattr(self.src, name)

    def __setattr__(self, name, value):
        if name in ("inst", "src"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.src, name, value)

    def forward_started(self, t):
        self.inst.apply(self.src.forward_started(t))

    def backward_ended(self, t):
        self.inst.apply(self.src.backward_ended(t))

    def fetch_started(self, t, grad_enabled):
        self.inst.apply(self.src.fetch_started(t, grad_enabled))

    def finish(self):
        self.inst.apply(self.src.finish())
        return self.src.chosen


def manual_sgd_events(src, n, t0=1_000):
    """forward (model), forward (criterion), backward: n iterations, 100 ns apart."""
    t = t0
    for _ in range(n):
        src.forward_started(t)
        src.forward_started(t + 10)
        src.backward_ended(t + 50)
        t += 100


def test_backward_outranks_forward_and_gives_one_step_per_iteration():
    inst = FakeInst()
    src = Driven(inst, None)
    manual_sgd_events(src, 6)
    assert src.chosen is None  # undecided while it runs: an optimizer could still step
    assert src.finish() == "backward"
    assert list(inst.timer.engine.boundaries) == [1_050 + 100 * k for k in range(6)]


def test_an_optimizer_that_exists_holds_the_choice_open_for_steps():
    # Gradient accumulation: backward passes come before the first optimizer step; with an
    # optimizer made, --steps must not stop on backward counts.
    inst = FakeInst(stop_at=3)
    src = Driven(inst, None)
    src.optimizers_made = 1
    manual_sgd_events(src, 5)
    assert inst.stopped_at is None and src.chosen is None
    # Without one (manual SGD), the best source seen reaching --steps stops the run.
    inst2 = FakeInst(stop_at=3)
    src2 = Driven(inst2, None)
    manual_sgd_events(src2, 5)
    assert src2.chosen == "backward" and inst2.stopped_at == 3
    # Forward reached 3 first (two module calls an iteration) but backward outranks it.
    assert inst2.timer.engine.boundaries[:3] == [1_050, 1_150, 1_250]


def test_batch_starts_mark_steps_and_eval_fetches_do_not():
    inst = FakeInst()
    src = Driven(inst, None)
    for k in range(4):
        src.fetch_started(1_000 + 100 * k, grad_enabled=True)
        src.forward_started(1_010 + 100 * k)
    src.fetch_started(1_400, grad_enabled=True)  # the fetch that ends the epoch
    src.fetch_started(1_500, grad_enabled=False)  # an evaluation loader under no_grad
    assert src.finish() == "batch"
    assert list(inst.timer.engine.boundaries) == [1_100, 1_200, 1_300, 1_400]


def test_inference_falls_to_forward_and_the_last_fetch_closes_the_last_step():
    inst = FakeInst()
    src = Driven(inst, None)
    for k in range(3):
        src.fetch_started(1_000 + 100 * k, grad_enabled=False)
        src.forward_started(1_010 + 100 * k)
    src.fetch_started(1_300, grad_enabled=False)
    assert src.finish() == "forward"
    assert list(inst.timer.engine.boundaries) == [1_110, 1_210, 1_300]


def test_forced_source_is_used_from_the_start():
    inst = FakeInst()
    src = Driven(inst, "forward")
    manual_sgd_events(src, 3)
    assert src.chosen == "forward" and src.finish() == "forward"
    assert list(inst.timer.engine.boundaries) == [1_010, 1_100, 1_110, 1_200, 1_210]


def test_nothing_seen_chooses_nothing():
    src = Driven(FakeInst(), None)
    assert src.finish() is None


def test_evaluation_pass_between_steps_becomes_its_own_row():
    ends = [100, 200, 300, 400]
    out, rows = with_eval_rows(ends, [(150, 250), (305, 395), (420, 500), (50, 60)])
    # (150, 250) spans the step end at 200: not between two steps, left alone; (305, 395) lies after
    # the step ending at 300 and before 400: its end becomes a step end, that row is evaluation;
    # (420, 500) after the last step: a row at the end; (50, 60) before any step: no row.
    assert out == [100, 200, 300, 395, 400, 500]
    assert rows == [3, 5]


def test_gradscaler_skip_counts_only_for_the_clock_optimizer():
    src = Driven(FakeInst(), None)
    d, g = object(), object()
    assert src.scaler_stepped(d, stepped=True) is False
    assert src.scaler_stepped(g, stepped=False) is False  # the second optimizer of the iteration
    assert src.scaler_stepped(d, stepped=False) is True and src.scaler_skips == 1


# -- real scripts through perfcore run ------------------------------------------------------------

def perfcore_run(tmp_path, *script, extra=(), env=None, timeout=240):
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "1", *extra, "--", *script]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    doc = json.loads((out / "run.json").read_text()) if (out / "run.json").is_file() else None
    return p, doc, out


def script_count(stdout: str, key: str) -> int:
    words = next(line for line in stdout.splitlines() if line.startswith(key)).split()
    return int(words[words.index(key) + 1])


def test_manual_sgd_language_model_steps_on_backward_with_steps_honoured(tmp_path):
    script = [sys.executable, str(SCRIPTS / "word_lm.py"), "--tokens", "1600"]
    p, doc, out = perfcore_run(tmp_path, *script)
    assert p.returncode == 0, p.stderr
    assert doc["step_source"] == "backward"
    assert doc["steps"] + doc["warmup_steps"] == script_count(p.stdout, "ITERATIONS")  # one step per iteration
    assert doc["evaluation"]["passes"] >= 1
    steps = pd.read_csv(out / "steps.csv")
    assert (steps.loc[~steps["evaluation"], "backward_ms"] > 0).all()  # every training row holds its backward
    # --steps stops it, although nothing in it is torch.optim.
    p2, doc2, _ = perfcore_run(tmp_path / "s", *script, "--epochs", "50", extra=("--steps", "4"))
    assert p2.returncode == 0, p2.stderr
    assert doc2["steps"] == 4 and doc2["exit"]["reason"] == "steps reached"
    assert "ITERATIONS" not in p2.stdout and "end of epoch   2" not in p2.stdout


def test_gan_two_optimizers_one_step_per_iteration(tmp_path):
    p, doc, _ = perfcore_run(tmp_path, sys.executable, str(SCRIPTS / "gan.py"))
    assert p.returncode == 0, p.stderr
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == script_count(p.stdout, "ITERATIONS")
    assert doc["batches_per_step"] == pytest.approx(1.0)


def test_gradient_accumulation_one_step_per_update_and_batches_per_step(tmp_path):
    p, doc, _ = perfcore_run(tmp_path, sys.executable, str(SCRIPTS / "grad_accum.py"), "--accumulation-steps", "4")
    assert p.returncode == 0, p.stderr
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == script_count(p.stdout, "UPDATES") == 12
    assert doc["batches_per_step"] == pytest.approx(4.0)
    (ld,) = doc["loaders"]
    line = next(i for i, t in enumerate((SCRIPTS / "grad_accum.py").read_text().splitlines(), 1) if "DataLoader(" in t)
    path, _, at = ld["site"].rpartition(":")  # a path the user can open: relative to the working directory
    assert Path(path).resolve() == (SCRIPTS / "grad_accum.py").resolve() and at == str(line)
    assert ld["batches"] == 48 and ld["batch_size"] == 8 and ld["role"] == "train"


def test_gradscaler_skipped_step_is_still_one_step(tmp_path):
    p, doc, _ = perfcore_run(tmp_path, sys.executable, str(SCRIPTS / "amp_skip.py"), "--iters", "20")
    assert p.returncode == 0, p.stderr
    assert "SKIPPED 1" in p.stdout  # the scaler did skip one optimizer.step()
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == 20 and doc["scaler_skipped_steps"] == 1


def test_inference_under_no_grad_steps_on_forward(tmp_path):
    p, doc, _ = perfcore_run(tmp_path, sys.executable, str(SCRIPTS / "infer.py"))
    assert p.returncode == 0, p.stderr
    assert doc["step_source"] == "forward"
    assert doc["steps"] + doc["warmup_steps"] == script_count(p.stdout, "BATCHES") == 10


def test_evaluation_every_n_steps_is_reported_apart(tmp_path):
    p, doc, out = perfcore_run(tmp_path, sys.executable, str(SCRIPTS / "eval_every.py"), "--eval-every", "8",
                               "--val-delay", "0.004")
    assert p.returncode == 0, p.stderr
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == script_count(p.stdout, "TRAIN_STEPS") == 32
    ev = doc["evaluation"]
    assert ev["passes"] == 4 and ev["apart"] and len(ev["rows"]) == 4
    steps = pd.read_csv(out / "steps.csv")
    # Each pass reads 96 items at >= 4 ms: its row is long; the training rows do not carry it.
    eval_ms = steps.loc[steps["evaluation"], "wall_ms"]
    assert (eval_ms >= 96 * 4 * 0.9).all()
    assert doc["step_time_ms"]["p90"] < eval_ms.min()


def test_step_on_forces_the_source(tmp_path):
    p, doc, _ = perfcore_run(tmp_path, sys.executable, str(SCRIPTS / "grad_accum.py"), extra=("--step-on", "batch"))
    assert p.returncode == 0, p.stderr
    assert doc["step_source"] == "batch"
    assert doc["steps"] + doc["warmup_steps"] == 48


def test_no_step_writes_what_was_seen_and_exits_0(tmp_path):
    p, doc, out = perfcore_run(tmp_path, sys.executable, str(SCRIPTS / "idle.py"), "3",
                               extra=("--test-setting", "no_step_warn_s=1"))
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("perfcore: no step after 1 s of the script's CPU time") == 1
    assert "--step-on" in p.stderr
    # 3 s of the script's CPU time, some of it spent before perfcore's clock started (interpreter start)
    assert doc["steps"] == 0 and doc["seen"]["forward"] == 0 and doc["seen"]["wall_ms"] > 2000
    # run.json keeps the facts; the report says them as the run did
    assert doc["no_step"]["wall_s"] > 2 and doc["no_step"]["forward"] == 0 and not doc["no_step"]["optimizer_stepped"]
    said = next(s for s in p.stderr.splitlines() if s.startswith("perfcore: no step seen in"))
    rep = subprocess.run([sys.executable, "-m", "perfcore.cli", "report", str(out)], capture_output=True, text=True)
    assert rep.returncode == 0 and said in rep.stdout, rep.stderr


def test_a_slow_start_is_not_taken_for_a_loop_without_steps(tmp_path):
    # 7 s of waiting (slow imports on a busy machine, a download) before the loop: little CPU time
    # spent (torch's import, ~2 s), so the no-step notice (due after 5 s of it) stays silent.
    code = ("import time, torch\ntime.sleep(7)\nm = torch.nn.Linear(4, 1)\n"
            "o = torch.optim.SGD(m.parameters(), lr=0.1)\nfor _ in range(10):\n"
            "    o.zero_grad(); m(torch.randn(8, 4)).sum().backward(); o.step()\n")
    p, doc, _ = perfcore_run(tmp_path, sys.executable, "-c", code, extra=("--test-setting", "no_step_warn_s=5"))
    assert p.returncode == 0, p.stderr
    assert "no step after" not in p.stderr, p.stderr
    assert doc["steps"] + doc["warmup_steps"] == 10


def test_warmup_only_run_says_so_without_artefacts(tmp_path):
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "5", "--",
           sys.executable, str(SCRIPTS / "train_meter.py"), "--samples", "48", "--epochs", "1", "--workers", "2"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] == 0 and doc["warmup_steps"] == 3
    assert "ended during warm-up: 3 warm-up step(s), none measured" in p.stderr
    assert "0.00 ms" not in p.stderr
    # No steady step was measured: none is quoted, and the way to count every step is named.
    assert " steady" not in p.stderr and "--warmup 0" in p.stderr and doc["startup"]["steady_step_ms"] is None
    counts = [int(n) for n in re.findall(r"(\d+) worker\(s\)", p.stderr)]
    assert counts and all(n <= 64 for n in counts)  # no absurd worker counts
    assert doc["loaders"][0]["num_workers"] == 2 and len(doc["loaders"][0]["worker_startup_ms"]) == 1


# -- start-up and DataLoaders ---------------------------------------------------------------------

class FakeLoader:
    def __init__(self, num_workers, persistent):
        self.num_workers, self.persistent_workers = num_workers, persistent
        self.pin_memory, self.prefetch_factor, self.batch_size, self.dataset = False, 2, 8, object()


class FakeIter:
    def __init__(self):
        self._num_yielded = 0

    def _next_data(self):
        self._num_yielded += 1
        return self._num_yielded


def test_loaders_time_each_epochs_first_batch_and_what_persistent_workers_would_save(tmp_path):
    from perfcore.run.child.loaders import Loaders

    clock = iter(range(0, 10**9, 1_000_000))  # each reading 1 ms later
    loaders = Loaders(lambda: next(clock))
    restart, keep = FakeLoader(2, False), FakeLoader(2, True)
    loaders.made(restart, "train.py:10")
    loaders.made(keep, "train.py:11")
    for ld in (restart, keep):
        for _ in range(3):
            rec = loaders.epoch_started(ld, next(clock), grad_enabled=True)
            it = FakeIter()
            loaders.watch_first_batch(it, rec)
            for _ in range(4):
                it._next_data()
    (workers := tmp_path / "workers").mkdir()
    # One worker of the first loader made 2 batches in 5 ms each (pid, worker, start, end, ...).
    (workers / "123.L0.csv").write_text("123,0,0,5000000,4000000,1000000,8,-1\n123,0,0,5000000,4000000,1000000,8,-1\n")
    a, b = loaders.summary(workers)
    assert a["site"] == "train.py:10" and a["batches"] == 12 and a["worker_batch_ms"] == pytest.approx(5.0)
    assert a["worker_startup_ms"] == [1.0, 1.0, 1.0]  # iter() -> first batch: one clock tick each
    # Epochs 2 and 3 start their workers again: each would save its start-up less one batch's making.
    assert a["persistent_workers_would_save_ms"] == pytest.approx(0.0)  # 1 ms start-up < 5 ms a batch
    assert "persistent_workers_would_save_ms" not in b and b["worker_batch_ms"] is None
    assert loaders.training_batches() == 24


def test_startup_summary_on_a_hand_made_table():
    from perfcore.run.part_files import startup_summary

    full = pd.DataFrame({"start_ns": [2_000_000_000, 2_500_000_000, 2_510_000_000, 2_520_000_000],
                         "wall_ns": [500_000_000, 10_000_000, 10_000_000, 12_000_000],
                         "warmup": [True, False, False, False]})
    loaders = [{"training": True, "worker_startup_ms": [300.0, 250.0]}]
    s = startup_summary(1_000_000_000, full, loaders, measured=3)
    assert s == {"time_to_first_step_ms": 1500.0, "first_step_ms": 500.0, "steady_step_ms": 10.0,
                 "worker_startup_ms": 300.0, "worker_startup_total_ms": 550.0}
    for n_warm in (0, 1):  # a one-step run, measured or warm-up: no steady state to set it against
        one = full.iloc[:1].assign(warmup=bool(n_warm))
        s1 = startup_summary(1_000_000_000, one, [], measured=1 - n_warm)
        assert s1["steady_step_ms"] is None and s1["worker_startup_ms"] is None
    # A run that ended in warm-up: its later warm-up steps are no steady step, so none is kept to quote.
    warm = full.assign(warmup=True)
    assert startup_summary(1_000_000_000, warm, loaders, measured=0)["steady_step_ms"] is None


def test_worker_startup_per_epoch_from_a_real_run(tmp_path):
    p, doc, _ = perfcore_run(tmp_path, sys.executable, str(SCRIPTS / "train_meter.py"), "--workers", "2",
                             "--epochs", "3", "--samples", "96", "--delay", "0.002", extra=("--explain",))
    assert p.returncode == 0, p.stderr
    (ld,) = doc["loaders"]
    assert ld["num_workers"] == 2 and ld["persistent_workers"] is False and ld["batches"] == 18
    starts = ld["worker_startup_ms"]
    assert len(starts) == 3 and all(s > 0 for s in starts)
    assert ld["persistent_workers_would_save_ms"] == pytest.approx(
        sum(max(0.0, s - ld["worker_batch_ms"]) for s in starts[1:]))
    su = doc["startup"]
    assert su["worker_startup_ms"] == starts[0]
    assert su["time_to_first_step_ms"] > su["first_step_ms"] > 0
    assert "persistent_workers=True would save" in p.stderr


def test_step_sources_only_decide_and_return_what_their_owner_applies():
    """StepSources changes no timer itself: each observation returns the events it implies."""
    from perfcore.run.child.steps import NOTHING, EvalEnded

    inst = FakeInst()
    src = StepSources(inst, None)
    assert src.forward_started(1_000) == NOTHING and src.backward_ended(1_050) == NOTHING
    assert src.mode_changed(False, 1_060) == NOTHING  # model.eval(): a pass opens
    assert src.mode_changed(True, 1_080) == NOTHING  # closed, but no source chosen yet: no row of its own
    src.backward_ended(1_150)
    (chosen,) = src.finish()
    assert chosen == SourceChosen("backward", [1_050, 1_080, 1_150], [1], False)  # the pass became row 1
    assert len(inst.timer.engine.boundaries) == 0  # nothing applied yet: that is the owner's job
    assert src.backward_ended(1_250) == (StepEnded(1_250),)
    src.mode_changed(False, 1_260)
    assert src.mode_changed(True, 1_290) == (EvalEnded(1_260, 1_290),)


def test_an_unchosen_source_is_decided_at_its_bound_and_only_there():
    from types import SimpleNamespace

    from perfcore.run.child import steps as steps_mod
    from perfcore.run.child.steps import SourceChosen, StepSources

    inst = SimpleNamespace(timer=object(), stop_at=8)
    src = StepSources(inst, None)
    looked = []
    real = src.maybe_decide
    src.maybe_decide = lambda: looked.append(1) or real()
    # An inference loop: forward starts only. The 9th start ends the 8th step: --steps reached, no optimizer.
    events = [src.forward_started(t) for t in range(9)]
    assert all(e == () for e in events[:8]) and isinstance(events[8][0], SourceChosen)
    assert src.chosen == "forward" and len(looked) == 1  # looked for once, at the bound, not at every event
    # With an optimizer made (it may still step), only the settling bound decides.
    inst2 = SimpleNamespace(timer=object(), stop_at=8)
    src2 = StepSources(inst2, None)
    src2.optimizer_made()
    for t in range(steps_mod.DECIDE_BY):
        assert src2.forward_started(t) == ()
    assert src2.chosen is None and isinstance(src2.forward_started(steps_mod.DECIDE_BY)[0], SourceChosen)
