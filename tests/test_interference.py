"""Interference: the /proc reader on a hand-made /proc tree, the finding on injected samples, the verdict
that carries it, and the sampler against real CPU burners (a stranger's and the run's own child)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from perfcore.analysis.interference import interference_finding, window
from perfcore.analysis.verdict import decide, interference_of
from perfcore.capture.interference import FIELDS, InterferenceSampler, process_tree, read_stat, snapshot
from perfcore.report.words import interference_sentence as _sentence
from perfcore.report.words.verdict import verdict_long


def _write_proc(root, *, cpu, procs_running, processes):
    """A /proc with /proc/stat and, per pid, stat, status and task/<pid>/children.
    cpu: (user, nice, system, idle, iowait, irq, softirq, steal); processes: pid -> (ppid, utime,
    stime, cutime, cstime, nonvoluntary, children)."""
    (root / "stat").write_text("cpu  " + " ".join(map(str, cpu)) + " 0 0\ncpu0 1 2 3 4\n"
                               f"ctxt 1\nprocs_running {procs_running}\nprocs_blocked 0\n")
    for pid, (ppid, ut, st, cut, cst, nv, kids) in processes.items():
        d = root / str(pid)
        (d / "task" / str(pid)).mkdir(parents=True, exist_ok=True)
        fields = ["S", str(ppid)] + ["0"] * 9 + [str(ut), str(st), str(cut), str(cst)] + ["0"] * 30
        (d / "stat").write_text(f"{pid} (python train) " + " ".join(fields) + "\n")
        (d / "status").write_text(f"Name:\tpython\nvoluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t{nv}\n")
        (d / "task" / str(pid) / "children").write_text(" ".join(map(str, kids)) + (" " if kids else ""))


def test_reader_on_a_hand_made_proc(tmp_path):
    _write_proc(tmp_path, cpu=(100, 0, 50, 800, 10, 5, 5, 30), procs_running=3,
                processes={10: (1, 40, 10, 7, 3, 12, [11]), 11: (10, 20, 5, 0, 0, 1, [12]), 12: (11, 2, 1, 0, 0, 0, [])})
    s = read_stat(tmp_path)
    assert s == {"total_ticks": 1000, "busy_ticks": 160, "steal_ticks": 30, "procs_running": 3}
    assert process_tree(10, tmp_path) == {10: 0, 11: 1, 12: 2}
    rec = snapshot(10, tmp_path, now=lambda: 5.0)
    # The tree: each live process's own and reaped children's time, once; depth 0 and 1 apart.
    assert rec["tree_ticks"] == (40 + 10 + 7 + 3) + (20 + 5) + (2 + 1)
    assert rec["depth0_ticks"] == 50 and rec["depth1_ticks"] == 25 and rec["depth0_nonvoluntary"] == 12
    assert set(rec) == set(FIELDS)


def interference_sentence(f: dict) -> str:
    """The finding's sentence, from its figures as a run keeps them."""
    return _sentence(interference_of(f))


def _samples(*recs):
    return {f: [r.get(f) for r in recs] for f in FIELDS}


def _rec(t, busy, total, steal=0, tree=0, d0=0, d1=0, nv=0, runq=2, gpu=None):
    return {"t_s": t, "total_ticks": total, "busy_ticks": busy, "steal_ticks": steal, "procs_running": runq,
            "tree_ticks": tree, "depth0_ticks": d0, "depth1_ticks": d1, "depth0_nonvoluntary": nv,
            "depth1_nonvoluntary": 0, "tree_processes": 2, "gpu_other_processes": gpu, "gpu_other_bytes": None}


def test_finding_on_injected_samples_names_other_processes_first():
    # 10 s on 2 cores at 100 ticks/s: 2000 ticks. The machine was busy 1900 of them; the run's tree
    # 300 (main 200, its workers 100): strangers used 1600 ticks, 1.6 cores.
    a = _rec(0.0, busy=0, total=0)
    b = _rec(10.0, busy=1900, total=2000, tree=300, d0=200, nv=4000, runq=5)
    f = interference_finding(_samples(a, b), cores=2)
    assert f["others_cores"] == pytest.approx(1.6) and f["main_cores"] == pytest.approx(0.2)
    assert f["workers_cores"] == pytest.approx(0.1) and f["main_nonvoluntary_per_s"] == pytest.approx(400)
    assert f["material"] and f["reasons"] == ["others"] and "sentence" not in f  # facts; words in report/
    assert "1.6 of 2 cores" in interference_sentence(f) and "inflated" in interference_sentence(f)
    v = decide({"load": 11.2}, 100.0, interference=interference_of(f))
    assert verdict_long(v).startswith(interference_sentence(f))  # what inflated the steps comes first
    assert v.uncertain and v.interference.others_cores == pytest.approx(1.6)
    # The run's own workers busy on both cores are not interference.
    own = interference_finding(_samples(a, _rec(10.0, busy=1900, total=2000, tree=1850, d0=900)), cores=2)
    assert not own["material"] and own["workers_cores"] == pytest.approx(0.95)
    assert own["reasons"] == [] and interference_sentence(own).startswith("no material interference")
    assert not decide({"load": 11.2}, 100.0, interference=interference_of(own)).uncertain
    # Seen from a launcher (the script is its child): the launcher's own time is neither main nor workers.
    launched = interference_finding(_samples(a, _rec(10.0, busy=600, total=2000, tree=500, d0=50, d1=350)),
                                    cores=2, main_depth=1)
    assert launched["main_cores"] == pytest.approx(0.35) and launched["workers_cores"] == pytest.approx(0.1)
    # Steal and other GPU processes are material on their own.
    stolen = interference_finding(_samples(a, _rec(10.0, busy=300, total=2000, steal=200, tree=300, d0=300)),
                                  cores=2)
    assert stolen["material"] and stolen["reasons"] == ["steal"] and "10%" in interference_sentence(stolen)
    gpu = interference_finding(_samples(a, _rec(10.0, busy=300, total=2000, tree=300, d0=300, gpu=2)), cores=2)
    assert gpu["material"] and gpu["reasons"] == ["gpu"] and "2 other process(es)" in interference_sentence(gpu)
    assert interference_finding(_samples(a), cores=2) is None


def _burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _cpu_s(pid: int) -> float:
    """A live process's user+system CPU seconds, read apart from the sampler."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")
def test_sampler_sees_a_real_burner_as_a_stranger_and_its_own_child_as_a_worker():
    cores, hz = os.cpu_count() or 1, os.sysconf("SC_CLK_TCK")
    # The run's tree is a sleeping process; a spinning one beside it is a stranger.
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        before = _cpu_s(burner.pid)
        s = InterferenceSampler(pid=run.pid, interval_s=0.1, gpu=False).start()
        time.sleep(2.0)
        samples = s.stop()
        burned = _cpu_s(burner.pid) - before
    finally:
        for p in (burner, run):
            p.kill()
            p.wait()
    f = interference_finding(samples, cores=cores, clock_ticks=hz)
    assert f["samples"] >= 5 and f["span_s"] >= 1.5
    # Others hold at least the burner's CPU over the window (and whatever else ran on the machine).
    assert burned > 0.2 and f["others_cores"] * f["span_s"] >= 0.8 * burned - 0.05, (burned, f)
    assert f["main_cores"] < 0.1 and f["workers_cores"] < 0.1
    # The same spinning code as the run's own child: counted among the workers, as much as it burned.
    s = InterferenceSampler(interval_s=0.1, gpu=False).start()
    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<2: pass"])
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = 0
    g = interference_finding(s.stop(), cores=cores, clock_ticks=hz)
    truth = usage.ru_utime + usage.ru_stime
    assert truth > 0.2
    assert g["workers_cores"] * g["span_s"] == pytest.approx(truth, abs=0.1 + 0.15 * truth), (truth, g)


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")
def test_the_gpus_process_list_is_asked_for_once_a_run():
    # Listing a GPU's processes costs milliseconds under the driver's global lock, which the training
    # process's CUDA calls wait for: it was asked at every sample (4 a second). Now once, at the start,
    # and said in every sample, so any window of them carries it.
    calls = []

    def listing():
        calls.append(time.monotonic())
        return [(os.getpid(), 1 << 20), (1, 3 << 20)]  # this process is the run's own; pid 1 is another

    s = InterferenceSampler(interval_s=0.02, gpu=False)
    s.gpu = listing
    s.start()
    time.sleep(0.3)
    samples = s.stop()
    assert len(samples["t_s"]) >= 5 and len(calls) == 1
    assert set(samples["gpu_other_processes"]) == {1} and set(samples["gpu_other_bytes"]) == {3 << 20}
    assert interference_finding(samples, cores=2, clock_ticks=100)["gpu_other_processes"] == 1


def test_a_window_keeps_the_samples_that_bound_the_measured_steps():
    recs = [_rec(float(t), busy=100 * t, total=200 * t) for t in range(10)]
    w = window(_samples(*recs), 2.5, 6.2)
    assert w["t_s"] == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert window(_samples(*recs), -1.0, 99.0)["t_s"] == [float(t) for t in range(10)]


def test_perfcore_run_records_interference_over_its_measured_steps(tmp_path):
    """The launcher samples the script's tree: the script's main process (one level below it) is the
    run's own CPU, never counted among other processes, and the finding lands in run.json."""
    script = tmp_path / "spin.py"
    script.write_text(
        "import time, torch\n"
        "model = torch.nn.Linear(4, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "end = time.monotonic() + 3.0\n"
        "while time.monotonic() < end:\n"
        "    t = time.monotonic()\n"
        "    while time.monotonic() - t < 0.02:\n"
        "        pass\n"
        "    model(torch.ones(2, 4)).sum().backward(); opt.step(); opt.zero_grad()\n")
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "perfcore.cli", "run", "--quiet", "--out", str(out), "--",
                        sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    import json

    f = json.loads((out / "run.json").read_text())["interference"]
    assert f["samples"] >= 3 and f["cores"] == os.cpu_count()
    # The script spins one core for 3 s; on a loaded 2-core machine it still gets a good part of one.
    assert f["main_cores"] > 0.2, f
    assert f["main_cores"] + f["workers_cores"] + f["others_cores"] <= f["cores"] + 0.3, f
    assert isinstance(f["reasons"], list) and "sentence" not in f and interference_sentence(f)  # said at the edge
