"""Run folders and result files: perfcore never deletes, truncates or overwrites what it did not
create; default folders are unique; a write that fails is one line and leaves earlier files whole."""

from __future__ import annotations

import errno
import json
import multiprocessing as mp
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from run_docs import write_run_folder

from perfcore.cli import cli
from perfcore.errors import ResultWriteError, UsageError
from perfcore import jsonio
from perfcore.run.parent import folder
from perfcore.run.parent.folder import MARKER, prepare_out


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes: the "before" to compare "after" with."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def users_folder(root: Path) -> Path:
    """A folder a user keeps things in, with subfolders named like perfcore's scratch folders."""
    (root / "workers").mkdir(parents=True)
    (root / "parts").mkdir()
    (root / "workers" / "notes.csv").write_text("my,data\n1,2\n")
    (root / "parts" / "thesis.txt").write_text("chapter 1")
    (root / "run.json").write_text('{"mine": true}')
    return root


def test_a_new_or_empty_folder_is_taken_and_marked(tmp_path):
    out = prepare_out(tmp_path / "new" / "deep", "run")
    assert out == tmp_path / "new" / "deep" and json.loads((out / MARKER).read_text())["kind"] == "run"
    (tmp_path / "empty").mkdir()
    assert prepare_out(tmp_path / "empty", "health") == tmp_path / "empty"
    # The same process preparing it again (the CLI, then the run it calls) keeps it.
    assert prepare_out(out, "run") == out


def test_an_occupied_folder_is_left_alone_and_a_fresh_subfolder_used(tmp_path, capsys):
    mine = users_folder(tmp_path / "mine")
    before = tree(mine)
    out = prepare_out(mine, "run")
    assert out.parent == mine and out.name.startswith("run-") and (out / MARKER).is_file()
    after = tree(mine)
    assert {k: v for k, v in after.items() if not k.startswith(out.name)} == before
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out) in err[0] and "did not write" in err[0]


def test_an_earlier_runs_folder_is_not_overwritten(tmp_path, monkeypatch):
    first = prepare_out(tmp_path / "r", "run")
    (first / "run.json").write_text("{}")
    monkeypatch.setattr(folder, "_TOKEN", "another-process")  # as a second perfcore command would be
    second = prepare_out(tmp_path / "r", "run")
    assert second != first and second.parent == first and (first / "run.json").read_text() == "{}"


def test_a_file_or_unwritable_place_is_one_usage_error(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="Not a directory"):
        prepare_out(tmp_path / "f", "run")
    with pytest.raises(UsageError, match="cannot write to --out"):
        prepare_out(tmp_path / "f" / "below", "run")


def _make_default(args) -> str:
    cwd, n = args
    os.chdir(cwd)
    return "\n".join(str(prepare_out(None, "run")) for _ in range(n))


def test_default_folders_are_unique_across_processes_started_together(tmp_path):
    # Four processes (ranks, or hosts on a shared file system) each making folders in the same second.
    with mp.get_context("spawn").Pool(4) as pool:
        names = "\n".join(pool.map(_make_default, [(str(tmp_path), 25)] * 4)).split()
    assert len(names) == 100 and len(set(names)) == 100
    assert all(Path(tmp_path, n).is_dir() for n in names)


def test_a_taken_default_name_is_drawn_again(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = iter(["perfcore-runs/run-same", "perfcore-runs/run-same", "perfcore-runs/run-other"])
    monkeypatch.setattr(folder, "default_out", lambda kind="run", parent=None: Path(next(names)))
    assert prepare_out(None) == Path("perfcore-runs/run-same")
    assert prepare_out(None) == Path("perfcore-runs/run-other")


def test_merge_into_the_folder_it_merges_keeps_every_part(tmp_path):
    node = tmp_path / "node"
    write_run_folder(node / "parts" / "pid1", decided=False, steps=6)
    before = tree(node)
    res = CliRunner().invoke(cli, ["merge", str(node), "--out", str(node)])
    assert res.exit_code == 0, res.output
    after = tree(node)
    assert {k: v for k, v in after.items() if k in before} == before, "merge changed a file it did not write"
    merged = [p for p in node.iterdir() if p.name.startswith("merge-")]
    assert len(merged) == 1 and (merged[0] / "run.json").is_file()


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    jsonio.write(target, {"schema": "perfcore.run/1", "v": 1})
    old = target.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonio.os, "fsync", full)
    with pytest.raises(ResultWriteError, match="disk is full"):
        jsonio.write(target, {"schema": "perfcore.run/1", "v": 2})
    assert target.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_a_full_disk_in_the_cli_is_one_line_and_exit_1(tmp_path, monkeypatch):
    out = tmp_path / "env.json"
    out.write_text('{"schema": "perfcore.env/1"}\n')  # an earlier run's: perfcore replaces only its own

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonio.os, "fsync", full)
    res = CliRunner().invoke(cli, ["env", "--json", str(out)])
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"perfcore: error: cannot write {out}: the disk is full"), lines
    assert out.read_text() == '{"schema": "perfcore.env/1"}\n' and sorted(p.name for p in tmp_path.iterdir()) == [
        "env.json"
    ]


def test_a_read_only_folder_is_one_line(tmp_path, monkeypatch):
    real_open = os.open

    def read_only(path, flags, *args, **kw):  # the folder's marker is the first file written in it
        if str(path).endswith(MARKER):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", read_only)
    res = CliRunner().invoke(cli, ["health", "--out", str(tmp_path / "h"), "demo"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert lines == [
        f"perfcore: error: cannot write to --out {tmp_path / 'h'}: Read-only file system; choose a writable folder"
    ]


def test_atomic_path_keeps_the_suffix_for_writers_that_read_it(tmp_path):
    import pandas as pd

    with jsonio.atomic_path(tmp_path / "t.csv") as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".csv" and tmp.name.startswith(".t.")
        pd.DataFrame({"a": [1]}).to_csv(tmp, index=False)
    assert (tmp_path / "t.csv").read_text() == "a\n1\n"
    with pytest.raises(ZeroDivisionError):
        with jsonio.atomic_path(tmp_path / "u.csv") as tmp:
            tmp.write_text("half")
            1 / 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_ctrl_c_while_writing_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    """A second Ctrl-C lands while run.json is being written: the earlier version stays, no half file."""
    target = tmp_path / "run.json"
    jsonio.write(target, {"schema": "perfcore.run/1", "v": 1})
    old = target.read_bytes()
    real_fsync = jsonio.os.fsync

    def interrupted(fd):
        real_fsync(fd)
        raise KeyboardInterrupt

    monkeypatch.setattr(jsonio.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        jsonio.write(target, {"schema": "perfcore.run/1", "v": 2, "big": "x" * 100_000})
    assert target.read_bytes() == old and json.loads(old)["v"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


@pytest.mark.parametrize(
    "name, says",
    [
        ("diagnose.json", "verdict: input-bound"),
        ("health.json", "health"),
        ("sweep.json", "num_workers"),
    ],
)
def test_report_on_an_experiment_folder_shows_its_own_report(tmp_path, name, says):
    # A diagnose (or health, sweep) folder holds no run.json: `perfcore report` said its script left no
    # results in it (exit 1); it now shows the stage's report from its document, and --html rewrites its page.
    src = Path(__file__).with_name("report_docs") / name
    out = tmp_path / "stage"
    out.mkdir()
    (out / MARKER).write_text("{}")
    (out / name).write_bytes(src.read_bytes())
    before = (out / name).read_bytes()
    res = CliRunner().invoke(cli, ["report", str(out), "--html"])
    assert res.exit_code == 0, res.output
    assert says in res.output and (out / "report.html").exists() and (out / name).read_bytes() == before
    (out / name).write_text(json.dumps({"schema": json.loads(before)["schema"]}))  # its schema, nothing else
    res = CliRunner().invoke(cli, ["report", str(out)])
    assert res.exit_code == 2 and "corrupt" in res.output and "Traceback" not in res.output


def _failed_run(tmp_path, monkeypatch) -> Path:
    """A folder an earlier `perfcore run` (another process) left when its script failed before its first step."""
    first = prepare_out(tmp_path / "r", "run")
    (first / "parts" / "pid7").mkdir(parents=True)
    (first / "parts" / "pid7" / "error.txt").write_text("Traceback ...")
    (first / "workers").mkdir()
    (first / "workers" / "7-main.L0.csv").write_text("7,-1,0,1,1,0,4,-1\n")
    folder.mark_failed(first)
    monkeypatch.setattr(folder, "_TOKEN", "another-process")  # as the next perfcore command would be
    return first


def test_a_folder_left_by_a_run_that_failed_before_its_first_step_is_taken_by_the_next(tmp_path, monkeypatch, capsys):
    first = _failed_run(tmp_path, monkeypatch)
    assert json.loads((first / MARKER).read_text())["ended"] == "failed before its first step"
    assert prepare_out(tmp_path / "r", "run") == first
    assert sorted(p.name for p in first.iterdir()) == [MARKER]  # its leftovers gone, this run's marker
    assert json.loads((first / MARKER).read_text())["token"] == "another-process"
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "failed before its first step" in err and "this run writes there" in err


@pytest.mark.parametrize("spoil", ["user_file", "link", "finished", "other_kind", "file_in_a_part", "changed_since",
                                   "part_replaced_by_a_file", "no_manifest"])
def test_a_failed_folder_with_anything_else_in_it_is_left_alone(tmp_path, monkeypatch, spoil):
    # One folder, one run: only perfcore's own leftovers of a run that ended before its first step are
    # removed; a file of the user's, a link, a run with results or another command's folder stays whole.
    first = _failed_run(tmp_path, monkeypatch)
    kind = "run"
    if spoil == "user_file":
        (first / "notes.txt").write_text("mine")
    elif spoil == "link":
        (first / "workers" / "x").mkdir()
        (first / "progress").symlink_to(tmp_path)
    elif spoil == "finished":
        mark = json.loads((first / MARKER).read_text())
        jsonio.write(first / MARKER, {k: v for k, v in mark.items() if k != "ended"})
    elif spoil == "file_in_a_part":  # the user's file dropped where perfcore's leftovers are
        (first / "parts" / "pid7" / "model.pt").write_bytes(b"weights")
    elif spoil == "changed_since":  # one of the run's own files, changed since it listed it: no longer its own
        (first / "parts" / "pid7" / "error.txt").write_text("Traceback ... and my notes")
    elif spoil == "part_replaced_by_a_file":
        for f in (first / "parts" / "pid7").iterdir():
            f.unlink()
        (first / "parts" / "pid7").rmdir()
        (first / "parts" / "pid7").write_text("my notes, named like a part")
    elif spoil == "no_manifest":  # the marker alone never decides a deletion
        (first / ".perfcore-manifest.json").unlink()
    else:
        kind = "health"
    before = tree(first)
    out = prepare_out(tmp_path / "r", kind)
    assert out != first and out.parent == first
    assert {k: v for k, v in tree(first).items() if not k.startswith(out.name)} == before


def test_the_next_run_after_a_crash_before_the_first_step_writes_where_it_was_asked(tmp_path):
    # The script's own error is the line (not where perfcore looks for steps); the fixed script's run then
    # lands in the same --out, not in a subfolder of the failed one.
    import subprocess
    import sys

    scripts = Path(__file__).resolve().parent / "scripts"
    out = tmp_path / "r"

    def run(*script):
        return subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--out", str(out), "--warmup", "1", "--",
                               sys.executable, *script], capture_output=True, text=True, timeout=300)

    p = run(str(scripts / "crash_after.py"), "0")
    assert p.returncode == 1
    assert p.stderr.strip().splitlines()[-1] == \
        "perfcore: error: the script crashed before its first step (exit 1): ValueError: bad batch 0"
    q = run(str(scripts / "plain_tensors.py"), "autograd", "12")
    assert q.returncode == 0, q.stderr[-2000:]
    assert "failed before its first step" in q.stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["steps"] + doc["warmup_steps"] == 12 and not (out / "parts" / "error.txt").exists()
    assert not [d for d in out.iterdir() if d.name.startswith("run-")]


def crafted_failed_folder(root: Path, manifest: dict | None = None) -> Path:
    """A folder perfcore never made here (a copy, a tarball, a git checkout) whose marker says a run of
    this user on this host failed before its first step, its pid long dead, with the user's own files."""
    import socket
    import subprocess
    import sys

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    (root / "parts" / "pid7").mkdir(parents=True)
    (root / "parts" / "pid7" / "model.pt").write_bytes(b"weights of a week")
    (root / "workers").mkdir()
    (root / "workers" / "notes.md").write_text("my notes")
    (root / "progress").mkdir()
    (root / "progress" / "plan.txt").write_text("plan")
    (root / "parts" / "pid8").write_text("a regular file named like a part")
    jsonio.write(root / MARKER, {"schema": "perfcore.folder/1", "kind": "run", "host": socket.gethostname(),
                                 "pid": dead, "token": "0123456789abcdef", "ended": "failed before its first step"})
    if manifest is not None:
        jsonio.write(root / ".perfcore-manifest.json", {"schema": "perfcore.manifest/1", "token": "0123456789abcdef",
                                                       **manifest})
    return root


@pytest.mark.parametrize("manifest", [
    None,
    # A manifest that names every entry but cannot know their content: sizes and hashes of other bytes.
    {"files": [{"name": n, "size": 4, "sha256": "0" * 64} for n in
               ("parts/pid7/model.pt", "workers/notes.md", "progress/plan.txt", "parts/pid8")],
     "dirs": ["parts", "parts/pid7", "workers", "progress"]},
    {"files": "everything", "dirs": []},
])
def test_a_crafted_failed_marker_never_makes_a_run_delete_anything(tmp_path, capsys, manifest):
    mine = crafted_failed_folder(tmp_path / "copied", manifest)
    before = tree(mine)
    out = prepare_out(mine, "run")
    assert out.parent == mine, "a folder holding files perfcore did not list as its own was taken"
    assert {k: v for k, v in tree(mine).items() if not k.startswith(out.name)} == before
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "leaving it as it is" in err and "your earlier run" not in err


def _listed_as_they_are(root: Path, names: list[str]) -> list[dict]:
    """Manifest entries as a forger writes them: every file's true size and content hash."""
    import hashlib

    return [{"name": n, "size": len((root / n).read_bytes()),
             "sha256": hashlib.sha256((root / n).read_bytes()).hexdigest()} for n in names]


@pytest.mark.parametrize("lists", ["files_with_true_hashes", "empty_folders_only"])
def test_a_crafted_manifest_that_knows_every_byte_still_makes_no_run_delete_anything(tmp_path, capsys, lists):
    """A copied folder (a tarball, a git checkout) whose marker says "failed before its first step" and whose
    manifest lists the folder's own files with their true sizes and hashes: the files are not the ones a run
    made here, so the folder is not taken and nothing in it is removed, not even an empty folder."""
    mine = crafted_failed_folder(tmp_path / "copied")
    if lists == "empty_folders_only":
        for f in ("parts/pid7/model.pt", "workers/notes.md", "progress/plan.txt", "parts/pid8"):
            (mine / f).unlink()
        manifest = {"files": [], "dirs": ["parts", "parts/pid7", "workers", "progress"]}
    else:
        names = ["parts/pid7/model.pt", "workers/notes.md", "progress/plan.txt", "parts/pid8"]
        manifest = {"files": _listed_as_they_are(mine, names), "dirs": ["parts", "parts/pid7", "workers", "progress"]}
    jsonio.write(mine / ".perfcore-manifest.json", {"schema": "perfcore.manifest/1", "token": "0123456789abcdef",
                                                    **manifest})
    before = tree(mine)
    dirs = sorted(str(p.relative_to(mine)) for p in mine.rglob("*") if p.is_dir())
    out = prepare_out(mine, "run")
    assert out.parent == mine, "a folder perfcore did not make here was taken"
    assert {k: v for k, v in tree(mine).items() if not k.startswith(out.name)} == before
    assert dirs == sorted(str(p.relative_to(mine)) for p in mine.rglob("*") if p.is_dir() and out.name not in str(p))
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert "leaving it as it is" in err and "your earlier run" not in err


def test_a_crafted_manifest_never_removes_a_settings_file_it_lists(tmp_path):
    """drop_dead_settings removes the settings files a killed perfcore left, as its manifest lists them: a
    copied folder that ships a file of that name, listed with its true hash, keeps it."""
    import socket

    from perfcore.run.parent.folder import drop_dead_settings

    root = tmp_path / "copied"
    root.mkdir()
    name = ".perfcore-child-" + "ab" * 16
    (root / f"{name}.json").write_text('{"run_dir": "elsewhere"}')
    (root / f"{name}.outer").write_text("4242")
    jsonio.write(root / MARKER, {"schema": "perfcore.folder/1", "kind": "run", "host": socket.gethostname(),
                                 "pid": 999_999_999, "token": "0123456789abcdef"})
    jsonio.write(root / ".perfcore-manifest.json", {"schema": "perfcore.manifest/1", "token": "0123456789abcdef",
                                                    "files": _listed_as_they_are(root, [f"{name}.json"]), "dirs": []})
    before = tree(root)
    assert drop_dead_settings(root) == [] and tree(root) == before


def _take_at(args) -> str:
    """One of two commands starting on the same failed folder at once (each its own perfcore process)."""
    where, barrier, n = args
    folder._TOKEN = f"runner{n}"
    barrier.wait()
    return str(prepare_out(Path(where), "run"))


def failed_run_folder(root: Path, token: str) -> None:
    """The folder an earlier perfcore run (token `token`, its pid long dead) left when its script failed
    before its first step, marked and listed by perfcore's own code."""
    saved = folder._TOKEN
    folder._TOKEN = token
    try:
        assert prepare_out(root, "run") == root
        (root / "parts" / "pid7").mkdir(parents=True)
        (root / "parts" / "pid7" / "error.txt").write_text("Traceback ...")
        folder.mark_failed(root)
    finally:
        folder._TOKEN = saved
    mark = json.loads((root / MARKER).read_text())
    jsonio.write(root / MARKER, {**mark, "pid": 999_999_999, "started": None})  # its perfcore long gone


def test_two_runs_starting_on_one_failed_folder_never_both_take_it(tmp_path):
    """The take-over is one exclusive claim, then the marker read back: in every order of events exactly
    one of two runs takes the folder, the other writes into a subfolder, and nothing the winner wrote
    (its fresh marker) is moved or removed by the loser."""
    ctx = mp.get_context("fork")
    rounds, taken_by = 40, []
    with ctx.Manager() as manager:
        for r in range(rounds):
            root = tmp_path / f"r{r}"
            failed_run_folder(root, f"earlier{r}")
            barrier = manager.Barrier(2)
            with ctx.Pool(2) as pool:
                got = pool.map(_take_at, [(str(root), barrier, 0), (str(root), barrier, 1)])
            winners = [i for i, g in enumerate(got) if g == str(root)]
            assert len(winners) == 1, (r, got)
            loser = got[1 - winners[0]]
            assert Path(loser).parent == root and (Path(loser) / MARKER).is_file()
            mark = json.loads((root / MARKER).read_text())
            assert mark["token"] == f"runner{winners[0]}" and "ended" not in mark
            assert not (root / "parts").exists()
            assert sorted(p.name for p in root.iterdir()) == sorted([MARKER, Path(loser).name])
            assert (root / Path(loser).name / MARKER).is_file()  # the loser's own folder, left whole
            taken_by.append(winners[0])
    assert len(taken_by) == rounds


@pytest.mark.parametrize("mode,owner", [(0o777, "me"), (0o1777, "another user")])
def test_a_folder_any_user_may_change_is_never_written(tmp_path, mode, owner):
    """--out in (or below) a folder writable by all: another user who puts `parts -> ~/somewhere` there
    once perfcore has claimed it gets the script's part written through the link, outside the folder (and
    the run lost). Such a folder is refused in one line before anything is written; a sticky one the user
    or root owns (/tmp's kind) is fine."""
    if owner != "me" and os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    if owner != "me":
        os.chown(shared, 65534, 65534)
    for out in (shared, shared / "deeper" / "run"):
        with pytest.raises(UsageError) as e:
            prepare_out(out, "run")
        assert f"any user may change {shared} (writable by all" in str(e.value) and "\n" not in str(e.value)
    assert list(shared.iterdir()) == []


def test_a_sticky_folder_of_ones_own_is_written_below(tmp_path):
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    assert prepare_out(sticky / "r", "run") == sticky / "r" and (sticky / "r" / MARKER).is_file()
