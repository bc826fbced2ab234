"""perfcore's settings for its child travel as one frozen configuration in a file the parent writes into
the run folder it created, named by a random token; variables left in a shell change nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from perfcore.run import protocol
from perfcore.run.protocol import ChildConfig, ConfigError

# A loop that says what it trained on: every batch's size, and perfcore's variables it can see.
LOOP = textwrap.dedent("""
    import os, sys, torch
    from torch.utils.data import DataLoader, TensorDataset
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.arange(40, dtype=torch.float32).repeat(8, 1).T)
    sizes, firsts = [], []
    for (x,) in DataLoader(data, batch_size=4):
        sizes.append(len(x)); firsts.append(int(x[0, 0]))
        model(x).sum().backward(); opt.step(); opt.zero_grad()
    print("SIZES", *sizes)
    print("FIRSTS", *firsts)
    print("VARS", *sorted(k for k in os.environ if k.startswith("PERFCORE_")))
    if len(sys.argv) > 1:  # a Python of the script's own: what it sees, too
        import subprocess
        subprocess.run([sys.executable, "-c", "import os; print('CHILD_VARS', *sorted(k for k in os.environ "
                        "if k.startswith('PERFCORE_')))"], check=True)
""")

LEFTOVERS = {"PERFCORE_SYNTHETIC": "2", "PERFCORE_DL_OVERRIDES": '{"batch_size": 1}', "PERFCORE_TICK_EXTRA_S": "2",
             "PERFCORE_CHECKPOINT_S": "0.01", "PERFCORE_NO_STEP_WARN_S": "0", "PERFCORE_STEPS": "1",
             "PERFCORE_WARMUP": "0", "PERFCORE_BACKEND": "bogus", "PERFCORE_STEP_ON": "forward",
             "PERFCORE_OUTER_PID": "1@/elsewhere", "PERFCORE_SIGNAL_FD": "999"}


def _line(out: str, key: str) -> list[str]:
    return next(line for line in out.splitlines() if line.startswith(key + " ") or line == key).split()[1:]


def test_variables_left_in_the_shell_change_nothing(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    elsewhere = tmp_path / "elsewhere"
    # The test command's own switches (PERFCORE_WITH_CHROMIUM, CI's PERFCORE_REQUIRE_CUDA_BUILD) are a user's
    # to pass on and perfcore does; the shell here holds only the leftovers, so the script's view is exact.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PERFCORE_")}
    env = dict(clean, **LEFTOVERS, PERFCORE_RUN_DIR=str(elsewhere), PERFCORE_CHILD_CONFIG=str(tmp_path / "x"))
    out = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "-q", "--warmup", "2", "--out", str(out), "--",
                        sys.executable, str(script), "sub"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    # It trained as the script says: 10 batches of 4, each loaded (none replayed), every one a step.
    assert _line(p.stdout, "SIZES") == ["4"] * 10
    assert _line(p.stdout, "FIRSTS") == [str(4 * k) for k in range(10)]
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] + doc["warmup_steps"] == 10 and doc["step_source"] == "optimizer"
    steps = pd.read_csv(out / "steps.csv")
    assert steps["perfcore_ms"].max() < 1000, steps  # no 2 s stall in a progress write
    assert "no step after" not in p.stderr and "bogus" not in p.stderr, p.stderr
    assert not elsewhere.exists() and not list(out.glob("parts/*/checkpoint"))
    # The script and the Pythons it starts see one variable of perfcore's: the file naming its settings.
    assert _line(p.stdout, "VARS") == [protocol.ENV_CHILD_CONFIG]
    assert _line(p.stdout, "CHILD_VARS") == [protocol.ENV_CHILD_CONFIG]
    # ... and that file is gone with the script: the folder holds perfcore's results only.
    assert not list(out.glob(f"{protocol.CONFIG_PREFIX}*"))


def test_triage_settings_reach_the_child_through_the_configuration(tmp_path, capfd):
    from perfcore.run.parent.folder import prepare_out
    from perfcore.run.parent.launch import RunSettings, child_config, run_instrumented

    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    out = prepare_out(tmp_path / "r")
    settings = RunSettings(warmup=2, backend="host", kernels=False)
    config = child_config(out, settings, dl_overrides={"batch_size": 2}, synthetic=3)
    assert run_instrumented([sys.executable, str(script)], config) == 0
    printed = capfd.readouterr().out
    sizes, firsts = _line(printed, "SIZES"), _line(printed, "FIRSTS")
    assert sizes == ["2"] * 20  # the override
    # The first 3 batches loaded, then only those handed out again: nothing more is loaded.
    assert firsts[:3] == ["0", "2", "4"] and set(firsts[3:]) == {"0", "2", "4"}
    from perfcore.run.parent.finish import finish_run

    doc = finish_run(out, 0, [sys.executable, str(script)])
    assert doc.dataloader_overrides.applied == 1 and doc.synthetic.keep == 3


def _plain_python(tmp_path, pointer: str, code: str = "print('RAN')") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in protocol.PARENT_ONLY_ENV}
    paths = [str(protocol.BOOT_DIR)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(PYTHONPATH=os.pathsep.join(paths), **{protocol.ENV_CHILD_CONFIG: pointer})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)


def test_a_leftover_pointer_instruments_nothing_and_says_so_in_one_line(tmp_path):
    run = tmp_path / "old-run"
    run.mkdir()
    # The file of a run that is over (removed), and one a perfcore wrote that did not start this Python.
    gone = ChildConfig(run_dir=str(run)).write()
    gone.path.unlink()
    r = _plain_python(tmp_path, str(gone.path))
    assert r.returncode == 0 and r.stdout.strip() == "RAN"
    assert len(r.stderr.strip().splitlines()) == 1 and "the run it belonged to is over" in r.stderr, r.stderr
    other = subprocess.run([sys.executable, "-c", "from perfcore.run.protocol import ChildConfig; import sys; "
                            f"print(ChildConfig(run_dir={str(run)!r}).write().path)"],
                           capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    r = _plain_python(tmp_path, other, "import torch; print('RAN')")
    assert r.returncode == 0 and r.stdout.strip() == "RAN"
    assert len(r.stderr.strip().splitlines()) == 1 and "did not start this process" in r.stderr, r.stderr
    assert not (run / "parts").exists() and not (run / "progress").exists()


@pytest.mark.parametrize("field,value,words", [("warmup", -3, "warmup=-3 is not a whole number"),
                                                ("steps", "abc", "steps='abc'"),
                                                ("step_on", "bogus", "step_on='bogus' is not one of"),
                                                ("no_step_warn_s", "x", "no_step_warn_s='x' is not a number"),
                                                ("dl_overrides", "{bad", "is not a JSON object"),
                                                ("surprise", 1, "unknown settings ['surprise']")])
def test_a_bad_configuration_leaves_the_script_unprofiled_with_one_line(tmp_path, field, value, words):
    run = tmp_path / "r"
    run.mkdir()
    written = ChildConfig(run_dir=str(run)).write()
    doc = json.loads(written.path.read_text())
    doc[field] = value
    written.path.write_text(json.dumps(doc))
    r = _plain_python(tmp_path, str(written.path), "import torch; print('RAN')")
    assert r.returncode == 0 and r.stdout.strip() == "RAN" and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and lines[0].startswith("perfcore: not active"), r.stderr


def test_a_pointer_to_a_file_not_named_as_written_or_a_link_is_refused(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    written = ChildConfig(run_dir=str(run)).write()
    renamed = run / f"{protocol.CONFIG_PREFIX}{'0' * 32}{protocol.CONFIG_SUFFIX}"
    os.link(written.path, renamed)
    link = run / f"{protocol.CONFIG_PREFIX}{'1' * 32}{protocol.CONFIG_SUFFIX}"
    link.symlink_to(written.path)
    for pointer, words in [(str(renamed), "was not written for its own folder"), (str(link), "cannot be read"),
                           ("relative.json", "does not name a file perfcore run writes")]:
        with pytest.raises(ConfigError, match=words):
            ChildConfig.load(pointer)


def test_the_configuration_is_frozen_and_round_trips():
    c = ChildConfig(run_dir="/r", steps=3, dl_overrides={"batch_size": 2}, step_on="batch")
    assert ChildConfig.from_json(c.to_json()) == c
    with pytest.raises(TypeError):
        c.dl_overrides["batch_size"] = 9
    with pytest.raises(AttributeError):
        c.steps = 4
    with pytest.raises(ConfigError, match="run_dir='r' is not an absolute path"):
        ChildConfig(run_dir="r")


def test_the_hidden_test_setting_is_checked_in_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--out", str(tmp_path / "r"),
                        "--test-setting", "tick_extra_s=-1", "--", sys.executable, "-c", "pass"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "give NAME=SECONDS" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "--test-setting" not in subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--help"],
                                                  capture_output=True, text=True, timeout=60).stdout


def test_the_magic_and_a_trainer_session_leave_no_folder_and_no_variable(tmp_path):
    code = textwrap.dedent('''
        import glob, json, os, tempfile, torch
        from perfcore.run.child.magic import run_cell
        from perfcore.integrations.session import Session
        tmp = tempfile.gettempdir()
        cell = """
        import torch
        m = torch.nn.Linear(4, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(8):
            m(torch.randn(2, 4)).sum().backward(); o.step(); o.zero_grad()
        """
        exec(cell, {})  # once bare: what torch itself sets (TORCHINDUCTOR_CACHE_DIR) is not perfcore's
        before = (dict(os.environ), set(glob.glob(os.path.join(tmp, "perfcore-*"))))
        res, _ = run_cell(cell, {}, warmup=1)
        s = Session(warmup=1).start()
        exec(cell, {})
        res2 = s.finish()
        after = (dict(os.environ), set(glob.glob(os.path.join(tmp, "perfcore-*"))))
        print(json.dumps({"steps": res.steps, "steps2": res2.steps,
                          "env": {k: v for k, v in after[0].items() if before[0].get(k) != v},
                          "folders": sorted(after[1] - before[1])}))
    ''')
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc == {"steps": 7, "steps2": 7, "env": {}, "folders": []}


def _planted(folder, **settings) -> str:
    """A settings file someone else wrote into a folder they control, naming this test's process (an
    ancestor of the Python below) as the perfcore run that wrote it: right name, right token, right folder."""
    import secrets

    token = secrets.token_hex(16)
    doc = json.loads(ChildConfig(run_dir=str(folder), **settings).to_json())
    doc.update(launcher_pid=os.getpid(), token=token)
    path = folder / f"{protocol.CONFIG_PREFIX}{token}{protocol.CONFIG_SUFFIX}"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_planted_settings_file_naming_an_ancestor_changes_nothing_and_writes_nothing(tmp_path):
    """The variable and a crafted file are all it takes to reach a plain `python` run: the file must be held
    by the perfcore that wrote it, which a planted file is not."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    pointer = _planted(theirs, dl_overrides={"batch_size": 1}, synthetic=2, warmup=0)
    before = sorted(p.name for p in theirs.iterdir())
    r = _plain_python(tmp_path, pointer, LOOP)
    assert r.returncode == 0, r.stderr
    assert _line(r.stdout, "SIZES") == ["4"] * 10 and _line(r.stdout, "FIRSTS") == [str(4 * i) for i in range(10)]
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("perfcore: not active") and "does not hold it" in line, line
    assert sorted(p.name for p in theirs.iterdir()) == before  # no part, no progress, no claim written there


def test_the_same_settings_held_by_their_launcher_take_effect(tmp_path):
    # The control for the test above: the file, held open by the process it names, is what perfcore run does.
    run = tmp_path / "r"
    run.mkdir()
    pointer = _planted(run, dl_overrides={"batch_size": 1}, warmup=0)
    fd = os.open(pointer, os.O_RDONLY)
    try:
        r = _plain_python(tmp_path, pointer, LOOP)
    finally:
        os.close(fd)
    assert r.returncode == 0, r.stderr
    assert _line(r.stdout, "SIZES") == ["1"] * 40, r.stdout + r.stderr


def test_a_settings_file_too_large_to_be_one_is_refused_unread(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    written = ChildConfig(run_dir=str(run)).write()
    try:
        with open(written.path, "r+b") as fh:
            fh.truncate(64 << 20)
        with pytest.raises(ConfigError, match="more than a file perfcore writes for its run holds"):
            ChildConfig.load(str(written.path))
        os.unlink(written.path)
        os.mkfifo(written.path)
        with pytest.raises(ConfigError, match="not a regular file"):
            ChildConfig.load(str(written.path))
    finally:
        written.release()
