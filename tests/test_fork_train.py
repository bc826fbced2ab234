"""A process that forks and trains in the child: an optimizer made before os.fork() (or a
multiprocessing fork-start Process, Hogwild with fork) and carried into the child gives the child's
steps, measured as that child's own; a DataLoader worker, also forked, never becomes one."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_script_subprocesses import check_trainers_merged
from test_torch_reach import perfcore_run

SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.mark.parametrize("how", ["os_fork", "mp_fork"])
def test_an_optimizer_carried_across_fork_gives_the_childs_steps(tmp_path, how):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "fork_train.py"), how, "12")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "CHILD_TRAINED 12" in p.stdout
    assert doc["step_source"] == "optimizer"
    assert doc["steps"] + doc["warmup_steps"] == 12


def test_hogwild_by_fork_merges_the_trainers_and_sets_the_evaluating_parent_apart(tmp_path):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "hogwild.py"), "2", "fork", timeout=400)
    assert "TESTED" in p.stdout
    check_trainers_merged(p, tmp_path / "r")
