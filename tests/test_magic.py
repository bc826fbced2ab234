"""The %%perfcore cell magic's engine, in a fresh interpreter (it patches torch process-wide)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def test_cell_is_instrumented_in_process_and_stops_at_steps():
    code = textwrap.dedent('''
        import json, time, torch
        from perfcore.run.child.magic import run_cell
        from perfcore.report.words.runs import notes_of
        cell = """
        import time, torch
        from torch.utils.data import DataLoader, TensorDataset
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        seen = 0
        for x, y in DataLoader(TensorDataset(torch.randn(400, 8), torch.randint(0, 2, (400,))), batch_size=4):
            time.sleep(0.002)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            seen += 1
        """
        ns = {}
        res, timer = run_cell(cell, ns, steps=6, warmup=2)
        html = res._repr_html_()
        seen = ns["seen"]
        res2, _ = run_cell(cell, ns, steps=3, warmup=1)
        print(json.dumps({"steps": res.steps, "warm": res.warmup_steps, "seen": seen, "seen2": ns["seen"],
                          "html": "<table>" in html, "steps2": res2.steps, "host": res.breakdown_ms["host"]}))
    ''')
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["steps"] == 6 and doc["warm"] == 2
    assert doc["seen"] == 7  # the cell stopped right after the 8th optimizer step (2 warm-up + 6)
    assert doc["html"] and doc["steps2"] == 3 and doc["seen2"] == 3  # a fresh timer for the second cell
    assert doc["host"] >= 1.5  # the untimed 2 ms sleep is host time


def test_the_magic_answers_help_and_a_cell_without_a_step_in_one_line():
    code = textwrap.dedent('''
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic("load_ext", "perfcore")
        ip.run_cell_magic("perfcore", "--help", "x = 1")
        print("AFTER-HELP")
        ip.run_cell_magic("perfcore", "--steps 3", "y = 2")
        print("AFTER-NOSTEP")
    ''')
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "--steps" in p.stdout.split("AFTER-HELP")[0] and "unrecognized" not in p.stdout + p.stderr
    assert "AFTER-NOSTEP" in p.stdout and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("perfcore")]
    assert "ran no training step" in line


def test_a_cell_that_catches_the_stop_sees_only_what_perfcore_run_raises_and_is_measured_to_n():
    code = textwrap.dedent('''
        import json
        from perfcore.run.child.magic import run_cell
        from perfcore.report.words.runs import notes_of
        cell = """
        import torch
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        caught, ran = [], 0
        for i in range(40):
            try:
                model(torch.randn(4, 8)).sum().backward()
                opt.step()
                opt.zero_grad()
            except CATCH as e:
                caught.append(type(e).__module__ + "." + type(e).__name__)
            ran += 1
        """
        out = {}
        for catch in ("BaseException", "Exception"):
            ns = {}
            res, _ = run_cell(cell.replace("CATCH", catch), ns, steps=5, warmup=2)
            out[catch] = {"steps": res.steps, "caught": ns["caught"], "ran": ns["ran"],
                          "notes": [n for n in notes_of(res) if "after perfcore stopped it" in n]}
        print(json.dumps(out))
    ''')
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    broad, narrow = out["BaseException"], out["Exception"]
    # A cell catching BaseException sees the SystemExit `perfcore run --steps` raises, nothing of perfcore's.
    assert broad["caught"] == ["builtins.SystemExit"]
    assert broad["steps"] == 5 and broad["ran"] == 40  # it ran on, and nothing after the stop was counted
    (note,) = broad["notes"]
    assert note.startswith("the cell ran on") and "33 more optimizer step(s)" in note  # 40 less the 7th, where it stopped
    # A cell catching Exception is stopped at the 7th optimizer step (2 warm-up + 5) and told nothing more.
    assert narrow == {"steps": 5, "caught": [], "ran": 6, "notes": []}


def test_a_cells_evaluation_pass_is_set_apart_from_its_steps():
    code = textwrap.dedent('''
        import json
        from perfcore.run.child.magic import run_cell
        from perfcore.report.words.runs import notes_of
        cell = """
        import time, torch
        from torch.utils.data import DataLoader, TensorDataset
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        train = DataLoader(TensorDataset(torch.randn(48, 8), torch.randint(0, 2, (48,))), batch_size=4)
        test = DataLoader(TensorDataset(torch.randn(40, 8), torch.randint(0, 2, (40,))), batch_size=4)
        for epoch in range(2):
            for x, y in train:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad(); loss.backward(); opt.step()
            with torch.no_grad():
                for x, y in test:
                    model(x); time.sleep(0.01)
        """
        res, _ = run_cell(cell, {}, warmup=2)
        ev = res.evaluation
        print(json.dumps({"steps": res.steps, "warm": res.warmup_steps, "passes": ev.passes if ev else None,
                          "apart": ev.apart if ev else None}))
    ''')
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["steps"] + doc["warm"] == 24, doc  # 12 optimizer steps an epoch, and no evaluation row among them
    assert doc["passes"] == 2 and doc["apart"], doc  # one evaluation pass after each epoch, kept out of the steps


def test_terminal_ipython_prints_the_text_report_not_html_reprs():
    # A real terminal IPython (`ipython -c`), whose shell formats text/plain only: an HTML object
    # would print as its repr, once per status update and once for the report.
    cell = textwrap.dedent('''\
        %%perfcore --steps 30 --warmup 2
        import torch
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(1000):
            loss = model(torch.randn(4, 8)).sum()
            opt.zero_grad(); loss.backward(); opt.step()
        ''')
    code = f"get_ipython().run_line_magic('load_ext', 'perfcore'); get_ipython().run_cell({cell!r})"
    p = subprocess.run([sys.executable, "-m", "IPython", "--no-banner", "--colors=nocolor", "-c", code],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "IPython.core.display" not in p.stdout + p.stderr
    assert "perfcore: 30 steps measured (2 warm-up apart)" in p.stderr, p.stderr
    assert "verdict:" in p.stderr and "label      per step" in p.stderr
