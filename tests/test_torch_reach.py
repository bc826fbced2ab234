"""Torch instrumented however the script reaches it (a find_spec probe, Hugging Face libraries
imported first, accelerate, importlib, a thread), and steps found in loops with no nn.Module and
no DataLoader: `perfcore run` on small scripts of those shapes."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def perfcore_run(tmp_path, *script, extra=(), timeout=300):
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "1", *extra, "--",
           sys.executable, *script]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    doc = json.loads((out / "run.json").read_text()) if (out / "run.json").is_file() else None
    return p, doc


@pytest.mark.parametrize("how", ["probe", "transformers", "datasets", "accelerate", "import_module", "thread"])
def test_every_way_of_reaching_torch_gets_every_step(tmp_path, how):
    lib = {"transformers": "transformers", "datasets": "datasets", "accelerate": "accelerate"}.get(how)
    if lib and importlib.util.find_spec(lib) is None:
        pytest.skip(f"{lib} is not installed in this environment")
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "import_order.py"), how, "12")
    assert p.returncode == 0, p.stderr
    assert "ITERATIONS 12" in p.stdout
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == 12


def test_the_import_hook_survives_probes_and_wraps_each_spec(monkeypatch):
    # In-process: two probes, then the real import of a stand-in "torch" package; the hook patches
    # once, only when the module has executed.
    from perfcore.run.child.hooks import TorchImportHook

    class Inst:
        disabled = False
        patched = 0

        def patch_torch(self):
            self.patched += 1

    inst = Inst()
    hook = TorchImportHook(inst)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "torch").mkdir()
        (Path(d) / "torch" / "__init__.py").write_text("VALUE = 42\n")
        monkeypatch.syspath_prepend(d)
        saved = sys.modules.pop("torch", None)
        monkeypatch.setattr(sys, "meta_path", [hook] + [f for f in sys.meta_path])
        try:
            assert importlib.util.find_spec("torch") is not None
            assert importlib.util.find_spec("torch") is not None
            assert inst.patched == 0 and hook in sys.meta_path  # probes do not use the hook up
            import torch as fake

            assert fake.VALUE == 42
            assert inst.patched == 1 and hook not in sys.meta_path
        finally:
            sys.modules.pop("torch", None)
            if saved is not None:
                sys.modules["torch"] = saved


@pytest.mark.parametrize("how", ["autograd", "manual"])
def test_plain_tensor_loop_steps_on_the_optimizer(tmp_path, how):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "plain_tensors.py"), how, "12")
    assert p.returncode == 0, p.stderr
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == 12


@pytest.mark.parametrize("source", ["optimizer", "backward"])
def test_plain_tensor_loop_honours_step_on(tmp_path, source):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "plain_tensors.py"), "autograd", "12", extra=("--step-on", source))
    assert p.returncode == 0, p.stderr
    assert doc["step_source"] == source
    assert doc["steps"] + doc["warmup_steps"] == 12


def test_a_script_that_never_imports_torch_is_told_so(tmp_path):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "no_torch.py"), "10")
    assert p.returncode == 0, p.stderr
    from perfcore.report.words.runs import no_step_sentence
    from run_docs import run_of_json

    assert doc["steps"] == 0
    said = no_step_sentence(run_of_json(doc).no_step)  # from the figures run.json keeps
    assert "the script never imported torch" in said and "the script never imported torch" in p.stderr
    assert "--step-on" not in said and "--step-on" not in p.stderr


def test_steps_stops_recording_at_n_when_the_script_catches_the_stop(tmp_path):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "swallow_exit.py"), "60", extra=("--steps", "5"))
    assert p.returncode == 0, p.stderr
    assert "CAUGHT 1" in p.stdout and "ITERATIONS 60" in p.stdout  # it did run on
    assert doc["steps"] == 5 and doc["exit"]["reason"] == "steps reached"  # never counted past N
    (note,) = [n for n in doc["notes"] if "after perfcore stopped it" in n]
    assert "54 more optimizer step(s)" in note and "caught the SystemExit" in note


def test_steps_ends_every_training_thread(tmp_path):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "two_threads.py"), "400", extra=("--steps", "5"), timeout=200)
    assert p.returncode == 0, p.stderr
    assert doc["steps"] == 5 and doc["exit"]["reason"] == "steps reached"
    # Neither thread finished its 400 iterations, and the main thread was stopped too.
    assert "DONE" not in p.stdout and "JOINED" not in p.stdout
    from run_docs import run_of_json

    from perfcore.report.words.runs import notes_of

    assert not any("after perfcore stopped it" in n for n in notes_of(run_of_json(doc)))


def test_step_on_batch_without_a_dataloader_names_what_would_work(tmp_path):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "plain_tensors.py"), "autograd", "12", extra=("--step-on", "batch"))
    assert p.returncode == 0, p.stderr
    assert doc["steps"] == 0
    from run_docs import run_of_json

    from perfcore.report.words.runs import no_step_sentence

    sentence = no_step_sentence(run_of_json(doc).no_step)  # said from the figures run.json keeps
    assert "with --step-on batch" in sentence and "12 backward pass(es)" in sentence
    assert "--step-on optimizer would find steps here" in sentence and sentence in p.stderr


def test_two_optimizer_runs_say_which_row_holds_the_second_optimizers_step(tmp_path):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "gan.py"))
    assert p.returncode == 0, p.stderr
    assert doc["step_source"] == "optimizer" and doc["seen"]["optimizers"] == 2
    from run_docs import run_of_json

    from perfcore.report.words.findings import step_source_text

    text = step_source_text(run_of_json(doc))
    assert "2 optimizers" in text and "row k holds its step of iteration k-1" in text
    # One optimizer: the plain description.
    p1, doc1 = perfcore_run(tmp_path / "one", str(SCRIPTS / "plain_tensors.py"), "autograd", "12")
    assert step_source_text(run_of_json(doc1)) == "optimizer steps (torch.optim)"


@pytest.mark.parametrize("mode", ["stages", "layerwise", "per_epoch", "threads"])
def test_every_optimizer_that_trains_gives_its_steps(tmp_path, mode):
    # The step clock follows whichever optimizer is stepping: a later stage's optimizer (an LR finder
    # then training, the next layer of a layer-wise loop, a new optimizer per epoch, a thread of its
    # own) takes it over, so every iteration is a row; the step source's sentence says so and nothing
    # claims that counts match the script's when they do not.
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "optimizer_stages.py"), mode, "8")
    assert p.returncode == 0, p.stderr
    iterations = int(p.stdout.split("ITERATIONS")[1].split()[0])
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == iterations, (doc["steps"], iterations, doc["seen"])
    assert doc["seen"]["optimizer_handovers"] == doc["seen"]["optimizers"] - 1
    assert doc["seen"]["other_optimizer_steps"] == 0
    from run_docs import run_of_json

    from perfcore.report.words.findings import step_source_text

    text = step_source_text(run_of_json(doc))
    assert "one stage after the other" in text and "count matches" not in text
    assert "step_source_note" not in doc


def test_a_cast_on_the_cpu_is_not_a_transfer(tmp_path):
    # x.to("cpu", torch.float64) with no GPU moves nothing between devices: its time is the host's.
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "cpu_cast.py"), "12")
    assert p.returncode == 0, p.stderr
    assert doc["steps"] + doc["warmup_steps"] == 12
    assert doc["breakdown_ms"]["transfer"] == 0.0 and doc["breakdown_ms"]["host"] > 0


def test_a_bad_rank_the_script_sets_itself_is_noted(tmp_path):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "bad_rank.py"))
    assert p.returncode == 0, p.stderr
    assert doc["steps"] + doc["warmup_steps"] == 6
    note = "RANK='worker-a' is not a non-negative integer, as the script set it; ignoring it"
    assert any(n.startswith(note) for n in doc["notes"]), doc["notes"]
    assert f"perfcore: {note}" in p.stderr
