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
    assert doc["steps"] == 0
    assert "the script never imported torch" in doc["no_step"]
    assert "--step-on" not in doc["no_step"] and "--step-on" not in p.stdout
