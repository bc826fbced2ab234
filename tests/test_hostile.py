"""A run folder is untrusted input: names in its documents never become paths, a planted link never
redirects a write, nothing outside the folder is written or deleted, a live run is left alone, and
what is shown (terminal, HTML, notebook) cannot carry an escape sequence or a script. Each defect
has its own test; test_catalogue runs every hostile folder class through report, compare, merge
and open_report with a sentinel folder beside it that must not change."""
from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from run_docs import write_run_folder

from perfcore.cli import cli
from perfcore import jsonio


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="perfcore")


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root (links not followed): kind, size, mtime, content."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_file():
                out[str(p)] = ("file", st.st_size, st.st_mtime_ns, p.read_bytes())
            else:
                out[str(p)] = ("dir",)
    return out


def sentinel(tmp_path: Path) -> Path:
    """Files a hostile folder aims at: a results table, a checkpoint, a page."""
    s = tmp_path / "sentinel"
    (s / "data").mkdir(parents=True)
    (s / "data" / "results.csv").write_text("mine,1\n")
    (s / "victim.txt").write_text("do not touch\n")
    part = write_run_folder(s / "part", decided=False)
    (part / "checkpoint").mkdir()
    jsonio.write(part / "checkpoint" / "run.json", json.loads((part / "run.json").read_text()))
    return s


def unfinished(out: Path, ranks=(None,), **kw) -> Path:
    """A run folder perfcore was stopped before finishing: parts only, no run.json."""
    for i, rank in enumerate(ranks):
        key = f"rank{rank}" if isinstance(rank, int) else f"pid{4242 + i}"
        part = write_run_folder(out / "parts" / key, decided=False, **kw)
        doc = json.loads((part / "run.json").read_text())
        doc.update(rank=rank, pid=4242 + i, world_size=len(ranks) if rank is not None else None)
        jsonio.write(part / "run.json", doc)
    return out


def set_part(out: Path, key: str, **fields) -> None:
    path = out / "parts" / key / "run.json"
    doc = json.loads(path.read_text())
    doc.update(fields)
    path.write_text(json.dumps(doc))


# ---- names from a document never become paths


def test_a_rank_that_is_a_path_is_refused_and_writes_nothing_outside(tmp_path):
    s = sentinel(tmp_path)
    before = snapshot(s)
    out = unfinished(tmp_path / "r", ranks=(0, 1))
    # The part's rank walks out of the folder to sentinel/data/results(.csv); an empty steps_rankX/
    # made the path resolve before the fix.
    set_part(out, "rank1", rank=f"X/../../{s.name}/data/results")
    (out / "steps_rankX").mkdir()
    res = invoke("report", out)
    assert res.exit_code == 1, res.output
    (line,) = res.stderr.strip().splitlines()
    assert "rank1/run.json: is corrupt: part.rank is text, not a number" in line
    assert snapshot(s) == before


@pytest.mark.parametrize("field", ["pid", "world_size", "nested_in"])
def test_every_naming_field_of_a_part_is_checked(tmp_path, field):
    out = unfinished(tmp_path / "r", ranks=(0,))
    set_part(out, "rank0", **{field: "../../x"})
    res = invoke("report", out)
    assert res.exit_code == 1 and f"part.{field} is text, not a number" in res.stderr, res.output


def test_a_part_folder_named_otherwise_is_skipped(tmp_path):
    out = unfinished(tmp_path / "r")
    (out / "parts" / "pid4242").rename(out / "parts" / "evil\x1b]0;x\x07")
    res = invoke("report", out)
    assert res.exit_code == 2 and "not a perfcore run folder" in res.stderr
    assert "\x1b" not in res.stderr and "\x07" not in res.stderr
    assert "skipping" in res.stderr


def test_a_rank_that_is_a_float_integer_still_names_its_table(tmp_path):
    out = unfinished(tmp_path / "r", ranks=(0, 1))
    set_part(out, "rank1", rank=1.0)
    res = invoke("report", out)
    assert res.exit_code == 0, res.output
    assert (out / "steps_rank1.csv").is_file() and not (out / "steps_rank1.0.csv").exists()


# ---- writes never follow a link, and never leave the folder


OUTPUTS = ("run.json.tmp", "steps.csv", "steps.parquet", "report.html", "breakdown.png", "steps_rank0.csv",
           "steps_rank1.csv", "ranks.png")


def test_a_planted_link_at_every_output_is_replaced_not_followed(tmp_path):
    s = sentinel(tmp_path)
    before = snapshot(s)
    out = unfinished(tmp_path / "r", ranks=(0, 1))
    for name in OUTPUTS:
        (out / name).symlink_to(s / "victim.txt")
    res = invoke("report", out)
    assert res.exit_code == 0, res.output
    assert snapshot(s) == before
    for name in ("steps.csv", "steps.parquet", "report.html", "breakdown.png", "steps_rank0.csv", "ranks.png"):
        assert not (out / name).is_symlink() and (out / name).is_file(), name
    assert (out / "run.json.tmp").is_symlink()  # not perfcore's: left as it is


def test_the_atomic_writer_never_writes_through_a_planted_temporary_name(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    monkeypatch.setattr(jsonio.secrets, "token_hex", lambda n: "same")
    tmp_name = tmp_path / f".out.{os.getpid()}-same.tmp.json"
    tmp_name.symlink_to(victim)
    with pytest.raises(Exception):
        jsonio.write(tmp_path / "out.json", {"a": 1})
    assert victim.read_text() == "keep" and tmp_name.is_symlink() and not (tmp_path / "out.json").exists()


def test_a_linked_part_is_not_followed_and_its_checkpoint_survives(tmp_path):
    s = sentinel(tmp_path)
    before = snapshot(s)
    out = tmp_path / "r"
    (out / "parts").mkdir(parents=True)
    (out / "parts" / "rank0").symlink_to(s / "part")
    res = invoke("report", out)
    assert res.exit_code == 2 and "not a perfcore run folder" in res.stderr, res.output
    assert snapshot(s) == before and (s / "part" / "checkpoint" / "run.json").is_file()


def test_a_linked_parts_folder_is_not_followed(tmp_path):
    s = sentinel(tmp_path)
    (s / "parts").mkdir()
    (s / "parts" / "rank0").symlink_to(s / "part")
    before = snapshot(s)
    out = tmp_path / "r"
    out.mkdir()
    (out / "parts").symlink_to(s / "parts")
    res = invoke("report", out)
    assert res.exit_code == 2 and "not a perfcore run folder" in res.stderr, res.output
    assert snapshot(s) == before


def test_a_linked_checkpoint_is_neither_read_nor_deleted(tmp_path):
    s = sentinel(tmp_path)
    before = snapshot(s)
    out = unfinished(tmp_path / "r")
    (out / "parts" / "pid4242" / "checkpoint").symlink_to(s / "part" / "checkpoint")
    res = invoke("report", out)
    assert res.exit_code == 0, res.output
    assert snapshot(s) == before and (out / "parts" / "pid4242" / "checkpoint").is_symlink()


@pytest.mark.parametrize("theirs", ["model.pt", "notes/plan.txt"])
def test_a_finished_parts_checkpoint_keeps_what_perfcore_never_writes_there(tmp_path, theirs):
    """Finishing drops a finished part's checkpoint: perfcore's own files in it, never the folder whole. A
    copied folder's checkpoint/ holding its owner's files (a model, notes) lost them to rmtree."""
    out = unfinished(tmp_path / "r")
    ck = out / "parts" / "pid4242" / "checkpoint"
    ck.mkdir()
    jsonio.write(ck / "run.json", {"schema": "perfcore.run/1", "checkpoint": {"table": "steps.i64"}})
    (ck / "steps.i64").write_bytes(bytes(64))
    (ck / ".run.4242-0a1b2c.tmp.json").write_text("{")  # a write cut short by a kill
    (ck / theirs).parent.mkdir(exist_ok=True)
    (ck / theirs).write_bytes(b"their own")
    res = invoke("report", out)
    assert res.exit_code == 0, res.output
    assert (ck / theirs).read_bytes() == b"their own"
    assert sorted(str(p.relative_to(ck)) for p in ck.rglob("*") if p.is_file()) == [theirs]
    unfinished(tmp_path / "plain")
    ck = tmp_path / "plain" / "parts" / "pid4242" / "checkpoint"
    ck.mkdir()
    (ck / "steps.i64").write_bytes(bytes(64))
    assert invoke("report", tmp_path / "plain").exit_code == 0 and not ck.exists()  # all perfcore's: all gone


# ---- a folder whose run is still going


@pytest.fixture
def live_process():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()


def start_perfcore(where: Path) -> subprocess.Popen:
    """A real `perfcore run` still going (its script sleeps), in a folder of its own: the process a marker
    of a live run names."""
    return subprocess.Popen([sys.executable, "-m", "perfcore.cli", "run", "--no-monitor", "--quiet", "--out",
                             str(where), "--", sys.executable, "-c", "import time; time.sleep(600)"],
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_perfcore(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 9)
    proc.wait()


@pytest.fixture
def live_perfcore(tmp_path):
    proc = start_perfcore(tmp_path / "its_own")
    yield proc
    stop_perfcore(proc)


_SHARED: list[subprocess.Popen] = []


def shared_perfcore_pid() -> int:
    """One live perfcore for the catalogue's folders of a live run, started on first use."""
    if not _SHARED:
        import tempfile

        _SHARED.append(start_perfcore(Path(tempfile.mkdtemp(prefix="perfcore-live-")) / "its_own"))
    return _SHARED[0].pid


@pytest.fixture(scope="module", autouse=True)
def _stop_shared_perfcore():
    yield
    for proc in _SHARED:
        stop_perfcore(proc)


def marked(out: Path, pid: int, started: bool = True) -> None:
    """The marker a perfcore of pid `pid` writes: with when that process started (started=False: a marker
    of an earlier version, which had only the pid)."""
    import socket

    from perfcore import untrusted
    from perfcore.run.parent.folder import MARKER

    out.mkdir(parents=True, exist_ok=True)
    jsonio.write(out / MARKER, {"schema": "perfcore.folder/1", "kind": "run", "host": socket.gethostname(),
                                "pid": pid, "token": "another-perfcore",
                                **({"started": untrusted.start_ticks(pid)} if started else {})})


def script_of(out: Path) -> subprocess.Popen:
    """A live process as perfcore run starts a script: with its settings file, in `out`, named."""
    from perfcore.run.protocol import ENV_CHILD_CONFIG

    env = {**os.environ, ENV_CHILD_CONFIG: str(out.resolve() / ".perfcore-child-0123.json")}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
    time.sleep(0.05)
    return proc


def test_report_on_a_live_run_says_so_and_writes_nothing(tmp_path, live_perfcore):
    out = unfinished(tmp_path / "r")
    marked(out, live_perfcore.pid)
    before = snapshot(out)
    res = invoke("report", out)
    assert res.exit_code == 1, res.output
    (line,) = res.stderr.strip().splitlines()
    assert f"still going (perfcore (pid {live_perfcore.pid}) is alive); nothing was written" in line
    assert snapshot(out) == before
    stop_perfcore(live_perfcore)
    res = invoke("report", out)
    assert res.exit_code == 0 and (out / "run.json").is_file(), res.output


def test_report_sees_the_script_alive_after_perfcore_died(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    out = unfinished(tmp_path / "r")
    marked(out, int(dead.stdout))
    script = script_of(out)
    try:
        (out / "progress").mkdir()
        jsonio.write(out / "progress" / "pid4242.json", {"schema": "perfcore.progress/1", "pid": script.pid})
        res = invoke("report", out)
        assert res.exit_code == 1 and f"its script (pid {script.pid}) is alive" in res.stderr, res.output
        assert not (out / "run.json").exists()
    finally:
        script.kill()
        script.wait()


@pytest.mark.parametrize("named", ["pid1", "another_process", "old_marker_of_another_process",
                                   "marker_of_pid1_with_its_start", "marker_of_another_process_with_its_start"])
def test_a_live_process_that_is_not_the_runs_never_keeps_a_folder_going(tmp_path, live_process, named):
    """A progress file naming pid 1 (or any live process that is not a script of this run), or a marker
    naming a live process that is no perfcore (even with that process's true start tick, which anyone can
    read in /proc), made `perfcore report` refuse forever ("still going")."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    out = unfinished(tmp_path / "r")
    if named == "old_marker_of_another_process":
        marked(out, live_process.pid, started=False)
    elif named.startswith("marker_of_"):
        marked(out, 1 if "pid1" in named else live_process.pid)
    else:
        marked(out, int(dead.stdout))
        (out / "progress").mkdir()
        pid = 1 if named == "pid1" else live_process.pid
        jsonio.write(out / "progress" / "pid4242.json", {"schema": "perfcore.progress/1", "pid": pid})
    res = invoke("report", out)
    assert res.exit_code == 0 and (out / "run.json").is_file(), res.output


def test_a_huge_marker_or_progress_file_is_never_read_whole(tmp_path):
    from perfcore.run.parent.folder import MARKER, live_run, marker_of

    out = unfinished(tmp_path / "r")
    with open(out / MARKER, "wb") as fh:
        fh.truncate(512 << 20)  # 512 MiB: read whole it took 1 GB
    (out / "progress").mkdir()
    with open(out / "progress" / "pid4242.json", "wb") as fh:
        fh.truncate(512 << 20)
    import tracemalloc

    tracemalloc.start()
    try:
        assert marker_of(out) is None and live_run(out) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak


@pytest.mark.parametrize("marker", ["started_elsewhen", "older_than_the_process"])
def test_a_pid_reused_since_the_folder_was_written_is_not_its_run(tmp_path, live_perfcore, marker):
    """The pid a marker names now runs another perfcore (the pid was reused): not the folder's."""
    from perfcore import untrusted
    from perfcore.run.parent.folder import MARKER

    out = unfinished(tmp_path / "r")
    if marker == "started_elsewhen":  # the marker says when its perfcore started: not when this process did
        marked(out, live_perfcore.pid)
        doc = json.loads((out / MARKER).read_text())
        jsonio.write(out / MARKER, {**doc, "started": untrusted.start_ticks(live_perfcore.pid) - 100})
    else:  # an earlier version's marker, older than the live process: that pid is someone else's now
        marked(out, live_perfcore.pid, started=False)
        old = time.time() - 3600
        os.utime(out / MARKER, (old, old))
    res = invoke("report", out)
    assert res.exit_code == 0, res.output


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process as another user needs root")
def test_a_perfcore_of_another_user_never_keeps_a_users_folder_going(tmp_path):
    """A marker naming, with its true start tick, a live process of another user whose command line reads
    as perfcore's (anyone can name their process so): the folder's owner can still finish the folder."""
    other = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                              "import time; time.sleep(120)", "perfcore", "run"])
    try:
        time.sleep(0.3)
        out = unfinished(tmp_path / "r")
        marked(out, other.pid)
        res = invoke("report", out)
        assert res.exit_code == 0 and (out / "run.json").is_file(), res.output
    finally:
        other.kill()
        other.wait()


# ---- what is shown: terminal, HTML, notebook

ESC = "\x1b]0;owned\x07\x1b[2J\x1b[1A\r\x9b2K\u202e"


def poisoned(path: Path, **kw) -> Path:
    out = write_run_folder(path, **kw)
    doc = json.loads((out / "run.json").read_text())
    doc["notes"] = [f"note{ESC}end"]
    doc["device"] = f"cpu{ESC}"
    doc["command"] = ["python", f"x{ESC}.py"]
    # The user's site reaches the advice and the loader's lines.
    doc["loaders"] = [{"site": f"train{ESC}.py:9", "batch_size": 8, "num_workers": 0, "batches": 7, "training": True}]
    doc["findings"][0]["figures"]["loader"] = doc["loaders"][0]
    doc["kernel_categories"] = {f"conv{ESC}": {"share": 0.5, "ms": 3.0}}
    jsonio.write(out / "run.json", doc)
    return out


def controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
            or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"]


def test_report_and_compare_strip_control_characters(tmp_path):
    a, b = poisoned(tmp_path / "a"), poisoned(tmp_path / "b", compute_ms=9.0)
    brief = invoke("report", a)  # the short report: the header line carries the document's device name
    assert brief.exit_code == 0 and "on cpu" in brief.stdout, brief.output
    assert controls(brief.output) == []
    rep = invoke("report", a, "--explain")  # the whole text: the notes and every string
    assert rep.exit_code == 0 and "note" in rep.stdout and "end" in rep.stdout and "train" in rep.stdout, rep.output
    assert controls(rep.output) == []
    cmp = invoke("compare", a, b)
    assert cmp.exit_code == 0 and "conv" in cmp.stdout, cmp.output
    assert controls(cmp.output) == []


def test_merge_strips_control_characters(tmp_path):
    part = poisoned(tmp_path / "n" / "parts" / "rank0")
    doc = json.loads((part / "run.json").read_text())
    doc.update(rank=0, world_size=1, host=f"h{ESC}")
    jsonio.write(part / "run.json", doc)
    res = invoke("merge", tmp_path / "n", "--out", tmp_path / "m")
    assert res.exit_code == 0, res.output
    assert controls(res.output) == []


def test_an_error_quoting_a_document_strips_control_characters(tmp_path):
    out = unfinished(tmp_path / "r")
    set_part(out, "pid4242", schema=f"perfcore.other{ESC}/1")
    res = invoke("report", out)
    assert res.exit_code == 1 and "not perfcore.run" in res.stderr, res.output
    assert controls(res.stderr.rstrip("\n")) == []


def test_chart_data_cannot_end_or_stall_its_script_element(tmp_path):
    import re

    from perfcore.analysis.compare import compare_runs
    from perfcore.report.html import write_compare_report
    from perfcore.analysis.reader import load_run

    a, b = write_run_folder(tmp_path / "a"), write_run_folder(tmp_path / "b", compute_ms=9.0)
    doc = compare_runs(load_run(a)[0], load_run(b)[0])
    names = ("<!--<script", "</script><script>alert(1)</script>")
    page = write_compare_report(tmp_path / "c.html", doc, names).read_text()
    (data,) = re.findall(r"<script type='application/json' class='pc-data'>(.*?)</script>", page, re.S)
    assert "<" not in data
    assert names[0] in data.encode().decode("unicode_escape") or names[0] in json.dumps(json.loads(data))
    assert "alert(1)</script>" not in page


def test_links_are_plain_file_names(tmp_path):
    from perfcore.report.html import links

    html = links(["javascript:alert(1)", "../../etc/passwd", "trace.json", "a\x1bb.csv"])
    assert re.findall(r"href='([^']*)'", html) == ["trace.json"]
    out = write_run_folder(tmp_path / "r")
    doc = json.loads((out / "run.json").read_text())
    doc["files"] = {"javascript:alert(1)": "javascript:alert(1)"}
    jsonio.write(out / "run.json", doc)
    res = invoke("report", out, "--html")
    assert res.exit_code == 2 and "'files' names something other than a plain file name" in res.stderr
    assert not (out / "report.html").exists()


def test_open_report_renders_the_documents_never_the_folders_html(tmp_path):
    from perfcore.report.html import open_report

    out = write_run_folder(tmp_path / "r")
    (out / "report.html").write_text("<html><body><div class='perfcore'><script>window.owned=1</script>"
                                     "</div></body></html>")
    shown = open_report(out)._repr_html_()
    assert "window.owned" not in shown and "Causes, ranked" in shown


def test_open_report_of_a_stage_folder_renders_its_document(tmp_path):
    from perfcore.report.html import open_report

    out = tmp_path / "h"
    out.mkdir()
    jsonio.write(out / "health.json", {"schema": "perfcore.health/1", "workload": "<script>window.owned=1</script>",
                                       "verdict": {"bound": "ok", "summary": "fine"}})
    (out / "report.html").write_text("<div class='perfcore'><script>window.owned=2</script></div></body>")
    shown = open_report(out)._repr_html_()
    assert "<script>window.owned" not in shown and "&lt;script&gt;window.owned=1" in shown


# ---- one folder, one run


def _claim_at(args) -> str:
    from perfcore.run.parent.folder import prepare_out

    out, start_at = args
    time.sleep(max(0.0, start_at - time.time()))
    return str(prepare_out(Path(out), "run"))


def test_commands_started_together_on_one_empty_out_never_share_it(tmp_path):
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(4) as pool:
        pool.map(time.sleep, [0.01] * 4)  # every worker up before the rounds start
        for i in range(6):
            out = tmp_path / f"out{i}"
            out.mkdir()
            got = pool.map(_claim_at, [(str(out), time.time() + 0.3)] * 4)
            assert len(set(got)) == 4 and got.count(str(out)) == 1, got


def test_a_folder_claimed_between_the_look_and_the_claim_goes_to_the_other_command(tmp_path, monkeypatch):
    from perfcore.run.parent import folder

    out = tmp_path / "out"
    out.mkdir()
    real = folder._claim

    def raced(path, kind, job=None):  # another command's marker lands just before ours
        if Path(path) == out:
            (out / folder.MARKER).write_text(json.dumps({"schema": "perfcore.folder/1", "token": "other"}))
        return real(path, kind, job)

    monkeypatch.setattr(folder, "_claim", raced)
    got = folder.prepare_out(out, "run")
    assert got.parent == out and got != out
    assert json.loads((out / folder.MARKER).read_text())["token"] == "other"


def test_json_never_replaces_a_file_perfcore_did_not_write(tmp_path):
    run = write_run_folder(tmp_path / "r")
    mine = tmp_path / "notes.json"
    mine.write_text('{"my": "notes"}')
    res = invoke("report", run, "--json", mine)
    assert res.exit_code == 2 and "a file perfcore did not write" in res.stderr, res.output
    assert mine.read_text() == '{"my": "notes"}'
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    res = invoke("report", run, "--json", link)
    assert res.exit_code == 2 and "is a link" in res.stderr and not (tmp_path / "elsewhere.json").exists()
    earlier = tmp_path / "earlier.json"
    earlier.write_text('{"schema": "perfcore.run/1"}')
    res = invoke("report", run, "--json", earlier)
    assert res.exit_code == 0 and json.loads(earlier.read_text())["steps"] == 6, res.output


def test_json_and_html_never_replace_a_file_inside_an_input_folder(tmp_path):
    a, b = write_run_folder(tmp_path / "a"), write_run_folder(tmp_path / "b")
    before = snapshot(tmp_path)
    for flag in ("--json", "--html"):
        res = invoke("compare", a, b, flag, b / "run.json")
        assert res.exit_code == 2 and f"{flag} {b / 'run.json'} is inside {b}" in res.stderr, res.output
    res = invoke("report", a, "--json", a / "run.json")
    assert res.exit_code == 2 and "which this command reads" in res.stderr
    assert snapshot(tmp_path) == before


def test_html_replaces_only_a_page_perfcore_wrote(tmp_path):
    a, b = write_run_folder(tmp_path / "a"), write_run_folder(tmp_path / "b")
    page = tmp_path / "c.html"
    page.write_text("<html>my page</html>")
    res = invoke("compare", a, b, "--html", page)
    assert res.exit_code == 2 and page.read_text() == "<html>my page</html>"
    page.unlink()
    assert invoke("compare", a, b, "--html", page).exit_code == 0
    again = invoke("compare", a, b, "--html", page)
    assert again.exit_code == 0 and "perfcore compare" in page.read_text(), again.output


@pytest.mark.parametrize("flag", ["--html", "--json"])
def test_html_and_json_into_a_named_pipe_write_into_it_never_replace_it(tmp_path, flag):
    import stat
    import threading

    a, b = write_run_folder(tmp_path / "a"), write_run_folder(tmp_path / "b")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    # A daemon: where the pipe is replaced, nothing ever writes the pipe this reader waits on.
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    res = invoke("compare", a, b, flag, fifo)
    reader.join(timeout=60)
    assert res.exit_code == 0, res.output
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the user's named pipe was replaced by a regular file"
    assert ("perfcore compare" in got[0]) if flag == "--html" else json.loads(got[0])["schema"].startswith("perfcore")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "pipe"]  # no temporary file beside it


def test_report_html_cleans_what_the_terminal_cleans(tmp_path):
    """A hostile script name's escape sequences and right-to-left overrides: gone from report.html as from
    the terminal, for a run page and a compare page alike."""
    from perfcore.report.html import write_report
    from perfcore.analysis.reader import load_run

    a, b = poisoned(tmp_path / "a"), poisoned(tmp_path / "b", compute_ms=9.0)
    doc = json.loads((a / "run.json").read_text())
    doc["command"] = ["python", f"train\u202e{ESC}yp.exe\u2066\u2069"]
    jsonio.write(a / "run.json", doc)
    write_report(a, *load_run(a))
    page = (a / "report.html").read_text()
    assert "train" in page and controls(page.replace("\n", "").replace("\t", "")) == []
    res = invoke("compare", a, b, "--html", tmp_path / "c.html")
    assert res.exit_code == 0, res.output
    assert controls((tmp_path / "c.html").read_text().replace("\n", "").replace("\t", "")) == []


# ---- a launcher's variables left in the shell


def test_launcher_variables_are_integers_or_ignored_with_one_line():
    from perfcore.run.protocol import host_tag, launcher_env, part_key

    values, problems = launcher_env({"RANK": "/../../x", "WORLD_SIZE": "0", "LOCAL_RANK": " 3 "})
    assert values == {"RANK": None, "WORLD_SIZE": None, "LOCAL_RANK": 3}
    assert len(problems) == 2 and "RANK='/../../x' is not a non-negative integer" in problems[0]
    assert "keyed by its pid" in problems[0] and "WORLD_SIZE='0' is not a positive integer" in problems[1]
    assert launcher_env({"RANK": "2", "WORLD_SIZE": "4"}) == ({"RANK": 2, "WORLD_SIZE": 4, "LOCAL_RANK": None}, [])
    assert part_key("/../../x") == part_key(None) == f"pid{os.getpid()}-{host_tag()}" and part_key("3") == "rank3"


SCRIPTS = Path(__file__).resolve().parent / "scripts"


def test_a_bad_rank_keeps_the_run_and_says_so(tmp_path):
    env = dict(os.environ, RANK="/../../escaped", WORLD_SIZE="two")
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--warmup", "1", "--no-monitor", "--out",
                        str(tmp_path / "r"), "--", sys.executable, str(SCRIPTS / "exits.py")],
                       capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "RANK=" in ln or "WORLD_SIZE=" in ln]
    assert len(lines) == 2 and "keyed by its pid" in lines[0], p.stderr
    doc = json.loads((tmp_path / "r" / "run.json").read_text())
    assert doc["steps"] == 7 and doc["rank"] is None and doc["world_size"] is None
    assert [d.name[:3] for d in (tmp_path / "r" / "parts").iterdir()] == ["pid"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r"]


# ---- names perfcore's tables use are not phase names


@pytest.mark.parametrize("name", ["wall", "step", "perfcore", "warmup", "host", "other_phases", "mem", "forward_gpu",
                                  "_phase16", "monitor_cpu_percent", ""])
def test_a_reserved_phase_name_is_refused_in_one_line(name):
    from perfcore import StepTimer
    from perfcore.errors import UsageError

    timer = StepTimer(warmup=0)
    with pytest.raises(UsageError) as err:
        with timer.phase(name):
            pass
    assert "is reserved" in str(err.value) and "\n" not in str(err.value)
    with timer.phase("augment"):  # the timer goes on
        pass
    timer.step()
    assert "augment_ms" in timer.summary().columns


def test_the_summary_table_keeps_its_wall_time_beside_custom_phases():
    from perfcore import StepTimer

    timer = StepTimer(warmup=0)
    for _ in range(3):
        with timer.phase("augment"):
            time.sleep(0.002)
        time.sleep(0.002)
        timer.step()
    table = timer.summary()
    assert (table["wall_ms"] >= table["augment_ms"]).all() and (table["wall_ms"] >= 3.5).all()


# ---- the catalogue: every hostile folder class through every command that reads a folder

SCRIPT = "</script><script>window.owned=1</script><!--<script"


def _paths_everywhere(f: Path, s: Path) -> None:
    """A finished run whose every string names a path (relative, absolute, URL) or carries markup."""
    write_run_folder(f)
    doc = json.loads((f / "run.json").read_text())
    aim = f"../{s.name}/victim.txt"
    doc.update(device=aim, backend=str(s / "victim.txt"), host=SCRIPT, step_source=aim,
               command=[aim, SCRIPT], argv=[aim], notes=[aim, SCRIPT], rank=None)
    doc["loaders"] = [{"site": f"{aim}:1", "batch_size": 8, "num_workers": 0, "batches": 7, "training": True},
                      {"site": SCRIPT, "batch_size": 8, "num_workers": 0, "batches": 7, "training": False}]
    doc["kernel_categories"] = {SCRIPT: {"share": 0.5, "ms": 1.0}}
    doc["kernels"] = [{"name": SCRIPT, "count": 1, "total_ms": 1.0, "mean_us": 1.0}]
    jsonio.write(f / "run.json", doc)


def _paths_in_parts(f: Path, s: Path) -> None:
    """An unfinished run whose parts name paths in every field perfcore could make a name of."""
    unfinished(f, ranks=(0, 1))
    set_part(f, "rank1", host=f"../{s.name}", argv=[str(s / "victim.txt")], command=[f"../{s.name}/data/results"],
             step_source=f"../{s.name}")
    (f / "steps_rankX").mkdir()


def _bad_rank(f: Path, s: Path) -> None:
    unfinished(f, ranks=(0, 1))
    set_part(f, "rank1", rank=f"X/../../{s.name}/data/results")


def _links_at_outputs(f: Path, s: Path) -> None:
    unfinished(f, ranks=(0, 1))
    for name in ("run.json.tmp", "steps.csv", "steps.parquet", "report.html", "breakdown.png", "steps_rank0.csv",
                 "steps_rank1.csv", "ranks.png", "trace.json", "kernels.png", "monitor.csv", "monitor.png"):
        (f / name).symlink_to(s / "victim.txt")


def _links_under_parts(f: Path, s: Path) -> None:
    unfinished(f)
    (f / "parts" / "rank0").symlink_to(s / "part")
    (f / "parts" / "pid4242" / "checkpoint").symlink_to(s / "part" / "checkpoint")
    (f / "progress").symlink_to(s / "data")
    (f / "workers").symlink_to(s / "data")


def _linked_parts(f: Path, s: Path) -> None:
    f.mkdir()
    (s / "parts").mkdir(exist_ok=True)
    if not (s / "parts" / "rank0").is_symlink():
        (s / "parts" / "rank0").symlink_to(s / "part")
    (f / "parts").symlink_to(s / "parts")


def _finished_links(f: Path, s: Path) -> None:
    """A finished run whose outputs a report --html rewrites are links out of it."""
    write_run_folder(f)
    for name in ("report.html", "breakdown.png"):
        (f / name).symlink_to(s / "victim.txt")


def _controls(f: Path, s: Path) -> None:
    poisoned(f)


def _live(f: Path, s: Path) -> None:
    unfinished(f)
    marked(f, shared_perfcore_pid())  # a perfcore alive for the whole test, started before the marker was written


def _own_html(f: Path, s: Path) -> None:
    write_run_folder(f)
    (f / "report.html").write_text(f"<div class='perfcore'>{SCRIPT}</div></body>")


def _checkpoint_only(f: Path, kinds: list[str], table_bytes: int, declared: int) -> Path:
    """A killed run's part: only its checkpoint, a run.json describing steps.i64."""
    ck = f / "parts" / "pid4242" / "checkpoint"
    ck.mkdir(parents=True)
    cols = ["step", "wall_ms", "load_ms", "transfer_ms", "compute_ms", "comm_ms", "host_ms", "warmup"]
    jsonio.write(ck / "run.json", {
        "schema": "perfcore.run/1", "backend": "host", "device": "cpu", "steps": declared - 1, "warmup_steps": 1,
        "pid": 4242, "rank": None, "argv": [], "exit": {"reason": "killed before writing its results"},
        "checkpoint": {"steps": declared, "table": "steps.i64", "columns": cols, "kinds": kinds,
                       "table_bytes": table_bytes}})
    return ck


def _linked_table(f: Path, s: Path) -> None:
    """Every column an integer, the table a link to another file: its bytes would come back as step values."""
    (s / "victim.txt").write_bytes(os.urandom(640))
    (_checkpoint_only(f, ["i"] * 8, 640, 10) / "steps.i64").symlink_to(s / "victim.txt")


def _hardlinked_table(f: Path, s: Path) -> None:
    """As _linked_table, the table a second name (a hard link) of another file: no link to refuse."""
    (s / "victim.txt").write_bytes(os.urandom(640))
    os.link(s / "victim.txt", _checkpoint_only(f, ["i"] * 8, 640, 10) / "steps.i64")


def _marker_of_pid1(f: Path, s: Path) -> None:
    """A killed run whose marker names pid 1 with its true start tick (anyone can read it in /proc)."""
    unfinished(f)
    marked(f, 1)


def _sparse_table(f: Path, s: Path) -> None:
    """A sparse steps.i64 (a few bytes in a tarball) whose run.json claims all of it."""
    ck = _checkpoint_only(f, ["i", "ms", "ms", "ms", "ms", "ms", "ms", "b"], 64 << 20, (64 << 20) // 64)
    with open(ck / "steps.i64", "wb") as fh:
        fh.truncate(64 << 20)


def _not_the_runs_pid(f: Path, s: Path) -> None:
    """A killed run whose progress file names pid 1: alive forever, and no process of the run."""
    unfinished(f)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    marked(f, int(dead.stdout))
    (f / "progress").mkdir()
    jsonio.write(f / "progress" / "pid4242.json", {"schema": "perfcore.progress/1", "pid": 1})


def _planted_settings(f: Path, s: Path) -> None:
    """A killed run's folder holding a settings file its perfcore never listed as its own (planted, or the
    user's): the finisher removes only what the folder's manifest lists."""
    unfinished(f)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    marked(f, int(dead.stdout))
    (f / ".perfcore-child-0123abcd.json").write_text('{"mine": true}')
    (f / ".perfcore-child-0123abcd.outer").write_text("4242")


CLASSES = {"paths_everywhere": _paths_everywhere, "paths_in_parts": _paths_in_parts, "bad_rank": _bad_rank,
           "links_at_outputs": _links_at_outputs, "links_under_parts": _links_under_parts,
           "linked_parts": _linked_parts, "finished_links": _finished_links, "controls": _controls,
           "live": _live, "own_html": _own_html, "linked_table": _linked_table, "sparse_table": _sparse_table,
           "not_the_runs_pid": _not_the_runs_pid, "planted_settings": _planted_settings,
           "hardlinked_table": _hardlinked_table, "marker_of_pid1": _marker_of_pid1}


def _run(command: str, f: Path, tmp_path: Path) -> tuple[str, str]:
    """The command on folder f: (what it printed, the pages it wrote or returned)."""
    if command == "open_report":
        from perfcore.errors import PerfcoreError
        from perfcore.report.html import open_report

        try:
            return "", open_report(f)._repr_html_()
        except PerfcoreError as err:
            assert "\n" not in str(err)
            return "", ""
    args = {"report": ["report", f, "--html"],
            "compare": ["compare", f, f, "--html", tmp_path / "c.html", "--json", tmp_path / "c.json"],
            "merge": ["merge", f, "--out", tmp_path / "merged"]}[command]
    res = invoke(*args)
    assert res.exit_code in (0, 1, 2), res.output
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    if res.exit_code:
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    pages = ""
    written = {"report": f / "report.html", "compare": tmp_path / "c.html", "merge": tmp_path / "merged" / "report.html"}
    for page in [written[command]]:
        if page.is_file() and not page.is_symlink():
            pages += page.read_text()
    return res.output, pages


@pytest.mark.parametrize("command", ["report", "compare", "merge", "open_report"])
@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_catalogue(tmp_path, kind, command):
    s = sentinel(tmp_path)
    f = tmp_path / "f"
    CLASSES[kind](f, s)
    before = snapshot(s)
    before_f = snapshot(f)
    printed, pages = _run(command, f, tmp_path)
    assert snapshot(s) == before, kind  # nothing outside the folder changed
    if kind == "live":
        assert snapshot(f) == before_f  # and a live run's folder is left to its run
    assert controls(printed) == []
    if kind == "own_html":
        assert "window.owned" not in pages
    if kind in ("linked_table", "hardlinked_table", "sparse_table"):  # refused in one line: no table becomes steps
        assert not (f / "run.json").exists() and not (tmp_path / "merged" / "run.json").exists()
    if kind in ("not_the_runs_pid", "marker_of_pid1") and command == "report":
        assert (f / "run.json").is_file()  # finished: pid 1 is no process of its run
    if kind == "planted_settings":
        assert (f / ".perfcore-child-0123abcd.json").read_text() == '{"mine": true}'
        assert (f / ".perfcore-child-0123abcd.outer").read_text() == "4242"
    for page in re.split(r"(?=<!DOCTYPE html>)|(?=<div class='perfcore')", pages):
        # perfcore's own elements only (its data block, then uPlot and its script): nothing injected runs.
        assert set(re.findall(r"<script[^>]*>", page)) <= {"<script type='application/json' class='pc-data'>",
                                                           "<script>"}
        assert "<script>window.owned" not in page and "href='javascript" not in page
        for data in re.findall(r"class='pc-data'>(.*?)</script>", page, re.S):
            assert "<" not in data
        scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
        assert not any("window.owned" in x for x in scripts)
    assert {p.name for p in tmp_path.iterdir()} <= {"sentinel", "f", "c.html", "c.json", "merged"}
