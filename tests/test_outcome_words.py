"""How a script's end reads: a bare Ctrl-C, the script's own usage error (exit 2) told apart from
perfcore's, and what a row is when a GAN's two optimizers step in one iteration."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from run_docs import typed_run

from perfcore.analysis.run_context import Exit, Outcome
from perfcore.report.words.runs import exit_sentence as _exit_sentence
from perfcore.report.words.findings import other_steps_sentence, step_source_text, step_source_words
from perfcore.run.parent.outcome import before_first_step


def exit_sentence(ex, oc):
    return _exit_sentence(Exit(**ex), Outcome(**oc))

SCRIPTS = Path(__file__).parent / "scripts"


def run(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--out", str(tmp_path / "r"), *args],
                          capture_output=True, text=True, timeout=300)


def test_exit_sentences():
    assert exit_sentence({"reason": "interrupted", "exception": "KeyboardInterrupt: "}, {"code": 130}) \
        == "was interrupted (Ctrl-C, exit 130)"
    assert exit_sentence({"reason": "interrupted", "exception": "KeyboardInterrupt: stop"}, {"code": 130}) \
        == "was interrupted (Ctrl-C: stop, exit 130)"
    assert exit_sentence({"reason": "crashed", "exception": "ValueError: bad shape"}, {"code": 1}) \
        == "crashed (ValueError: bad shape; exit 1)"
    assert exit_sentence({"reason": "crashed", "exception": "RuntimeError: "}, {"code": 1}) == "crashed (RuntimeError; exit 1)"
    # the reason a checkpoint carries for a process that never wrote its own results
    assert exit_sentence({"reason": "killed before writing its results", "exception": None}, {"code": 137}) \
        == "was killed before writing its results (exit 137)"
    assert before_first_step(2, Exit()) == ("the script exited 2 before its first step (its own usage error: exit 2 by "
                                        "convention; its message is above)")
    assert before_first_step(1, Exit(exception="ImportError: x")) == "the script crashed before its first step (exit 1): ImportError: x"
    def run_of(**kw):
        r = typed_run(10.0, {"compute": 10.0}, **kw)
        import dataclasses

        return dataclasses.replace(r, steps=9, warmup_steps=1)

    assert other_steps_sentence(run_of(step_source="optimizer", seen={"optimizers": 1})) is None
    assert other_steps_sentence(run_of(step_source="backward", seen={"optimizers": 2})) is None
    gan = dict(step_source="optimizer", optimizer_order="interleaved",
               seen={"optimizers": 2, "optimizer_handovers": 0, "other_optimizer_steps": 10})
    assert other_steps_sentence(run_of(**gan)) == "one per row: the count matches the script's iterations"
    assert "12 steps of other optimizers against 10 rows" in other_steps_sentence(
        run_of(**{**gan, "seen": {**gan["seen"], "other_optimizer_steps": 12}}))
    # Stages in sequence: the step source's words say it all, once.
    stages = run_of(step_source="optimizer", optimizer_order="sequence",
                    seen={"optimizers": 2, "optimizer_handovers": 1, "other_optimizer_steps": 0})
    assert step_source_words(stages) == step_source_text(stages)
    assert step_source_text(stages).startswith("optimizer steps (torch.optim); 2 optimizers stepping in sequence")
    # A StepTimer's own step source (no hooks saw anything): as it is.
    assert step_source_words(typed_run(10.0, {"compute": 10.0}, step_source="timer.step()")) == "timer.step()"


def test_a_bare_ctrl_c_reads_as_ctrl_c(tmp_path):
    p = run(tmp_path, "--", sys.executable, str(SCRIPTS / "ctrl_c.py"))
    assert p.returncode == 130, p.stderr[-2000:]
    assert "partial results: the script was interrupted (Ctrl-C, exit 130)" in p.stderr
    report = p.stderr[p.stderr.index("perfcore: "):]
    assert "KeyboardInterrupt: )" not in report and report.count("interrupted") == 1


def test_the_scripts_usage_error_is_one_line_and_not_perfcores(tmp_path):
    p = run(tmp_path, "--", sys.executable, str(SCRIPTS / "usage_error.py"))
    assert p.returncode == 2
    ours = [line for line in p.stderr.splitlines() if line.startswith("perfcore")]
    assert ours == ["perfcore: error: the script exited 2 before its first step (its own usage error: "
                    "usage_error.py: error: the following arguments are required: --lr)"], p.stderr
    # perfcore's own usage error, also exit 2, names perfcore's command and never "the script".
    q = run(tmp_path / "q", "--steps", "many", "--", sys.executable, str(SCRIPTS / "usage_error.py"))
    assert q.returncode == 2 and q.stderr.startswith("perfcore run: error:") and "the script" not in q.stderr


def test_a_gan_row_is_documented_as_offset_by_one_optimizer(tmp_path):
    p = run(tmp_path, "--explain", "--warmup", "1", "--", sys.executable, str(SCRIPTS / "gan.py"))
    assert p.returncode == 0, p.stderr[-2000:]
    from perfcore.analysis.reader import load_run

    doc = load_run(tmp_path / "r")[0]
    assert doc.step_source == "optimizer" and "GAN" in step_source_text(doc)
    assert other_steps_sentence(doc) == "one per row: the count matches the script's iterations"
    # The step source said once, then what the rows hold of the other optimizer's steps.
    (line,) = [x for x in p.stderr.splitlines() if "steps counted at:" in x]
    assert line.strip() == f"steps counted at: {step_source_text(doc)}; {other_steps_sentence(doc)}"


def test_an_uncaught_exception_is_read_from_python_when_the_hook_never_ran(monkeypatch):
    # A second Ctrl-C landing as perfcore's excepthook starts: Python prints "Error in
    # sys.excepthook", the hook never sets the reason, and the results said "finished (exit 130)".
    import sys

    from perfcore.run.child.exits import uncaught_reason

    for name in ("last_exc", "last_type"):
        monkeypatch.delattr(sys, name, raising=False)
    assert uncaught_reason("finished") == "finished"
    monkeypatch.setattr(sys, "last_type", KeyboardInterrupt, raising=False)
    assert uncaught_reason("finished") == "interrupted"
    monkeypatch.setattr(sys, "last_type", ValueError, raising=False)
    assert uncaught_reason("finished") == "crashed"
    monkeypatch.setattr(sys, "last_type", SystemExit, raising=False)
    assert uncaught_reason("finished") == "finished"
    monkeypatch.setattr(sys, "last_exc", KeyboardInterrupt(), raising=False)  # Python 3.12+
    assert uncaught_reason("finished") == "interrupted"
