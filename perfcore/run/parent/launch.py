"""`perfcore run`: start an unmodified command with perfcore's instrumentation, then turn the
parts it wrote into one run folder (run.json, steps.csv, trace.json, PNGs) and a report."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from perfcore.errors import ResultWriteError, RunFailed, UsageError
from perfcore.run.parent.command import check_command
from perfcore.run.parent.folder import mark_failed, prepare_job_out, prepare_out, remember
from perfcore.run.parent.job import Job, finish_job, job_of, register
from perfcore.run.parent.outcome import oom_kills, results_lost, results_unfinished
from perfcore.run.parent.part_dirs import lost_results
from perfcore.run.parent.warm import WarmUp, results_begun
from perfcore.run import protocol

if TYPE_CHECKING:
    from perfcore.analysis.run_report import RunReport

__all__ = ["RunSettings", "run_command", "child_config", "child_env", "run_child", "run_instrumented"]


@dataclass(frozen=True)
class RunSettings:
    """What a run asks of perfcore: `perfcore run`'s options about the run (or a triage trial's), made once.
    steps: stop after N measured steps (None: the script's own end); monitor_s: the sampler's interval (None:
    no samples); test_settings: the child's upkeep shortened or slowed (tests and benchmarks); stop_line: the
    child says so in one line when it stops the script at its steps."""

    steps: int | None = None
    warmup: int = 5
    backend: str = "auto"
    kernels: bool = True
    step_on: str | None = None
    lines: bool = True
    monitor_s: float | None = None
    test_settings: Mapping[str, float] = field(default_factory=dict)
    stop_line: bool = True

    def check(self) -> None:
        """UsageError naming the first setting a run cannot have."""
        if self.steps is not None and self.steps <= 0:
            raise UsageError(f"--steps must be at least 1, got {self.steps}")
        if self.warmup < 0:
            raise UsageError(f"--warmup must be >= 0, got {self.warmup}")
        if self.step_on is not None and self.step_on not in protocol.STEP_SOURCES:
            raise UsageError(f"--step-on must be one of {', '.join(protocol.STEP_SOURCES)}, got {self.step_on!r}")


def child_config(
    out: Path,
    settings: RunSettings,
    *,
    dl_overrides: dict | None = None,
    synthetic: int = 0,
    job: Job | None = None,
) -> protocol.ChildConfig:
    """What the instrumented script is told, all of it from perfcore's own arguments (nothing from the
    environment but the job across machines this run is part of, job_of's reading of srun's variables).
    The child's clock is the same CLOCK_MONOTONIC: time to first step counts from here."""
    return protocol.ChildConfig(
        run_dir=str(out.resolve()),
        steps=settings.steps or 0,
        warmup=settings.warmup,
        backend=settings.backend,
        kernels=settings.kernels,
        lines=settings.lines,
        step_on=settings.step_on,
        t_launch_ns=time.perf_counter_ns(),
        dl_overrides=dl_overrides or {},
        synthetic=synthetic,
        job=job.digest if job else "",
        task_rank=job.task["rank"] if job and job.task else None,
        task_world_size=job.task["world_size"] if job and job.task else None,
        stop_line=settings.stop_line,
        **settings.test_settings,  # names checked by parse_test_settings
    )


def parse_test_settings(given: tuple[str, ...] | list[str]) -> dict[str, float]:
    """`--test-setting NAME=SECONDS` (hidden; tests and benchmarks shorten or slow the child's upkeep)."""
    out = {}
    for item in given:
        name, eq, value = item.partition("=")
        try:
            seconds = float(value) if eq else -1.0
        except ValueError:
            seconds = -1.0
        if name not in protocol.TEST_SETTINGS or not 0 <= seconds < float("inf"):
            raise UsageError(
                f"--test-setting {item!r}: give NAME=SECONDS, NAME one of {', '.join(protocol.TEST_SETTINGS)}"
            )
        out[name] = seconds
    return out


def child_env(config_path: Path | None = None) -> dict[str, str]:
    """The script's environment: the user's, less every variable perfcore ever used to talk to its child
    (a leftover changes nothing), with the boot folder first on PYTHONPATH and the configuration's file
    named (the one variable the script and its own Pythons see)."""
    env = {k: v for k, v in os.environ.items() if k not in protocol.PARENT_ONLY_ENV}
    if config_path is not None:
        paths = [str(protocol.BOOT_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env[protocol.ENV_CHILD_CONFIG] = str(config_path)
    return env


def run_instrumented(cmd: list[str], config: protocol.ChildConfig, **kw: Any) -> int:
    """run_child with perfcore's instrumentation: the configuration written into the run folder for the
    script's lifetime, and removed once it has ended (perfcore's own file; the finish never sees it). It is
    listed in the folder's manifest, so that a perfcore killed meanwhile leaves a file the finisher can
    prove is its own (folder.drop_dead_settings)."""
    written = config.write()
    try:
        remember(Path(written.run_dir), [written.path])
        return run_child(cmd, child_env(written.path), **kw)
    finally:
        written.release()


def _tty_sent(signum: int) -> bool:
    """Whether a SIGINT most likely came from the terminal's Ctrl-C, which the kernel sends to the
    whole foreground process group (the child got it too), rather than to perfcore's pid alone
    (an IDE's stop button, a supervisor, `kill -INT`): perfcore in the terminal's foreground group."""
    if signum != signal.SIGINT:
        return False
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False  # no controlling terminal: no Ctrl-C can have reached the child by itself
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


class _ChildSignals:
    """The signals the script's process received, as its Python's C-level handler reports them on a
    pipe (signal.set_wakeup_fd, set up by the boot file): one byte, the signal's number, per signal.
    A thread reads them as they come, so a stale byte never reads as a new signal."""

    def __init__(self):
        self.read_fd, self.write_fd = os.pipe()
        self.seen: dict[int, float] = {}
        self._changed = threading.Condition()

    def start(self) -> "_ChildSignals":
        os.close(self.write_fd)  # the child holds its copy; EOF once every holder has exited
        threading.Thread(target=self._read, name="perfcore-child-signals", daemon=True).start()
        return self

    def _read(self) -> None:
        try:
            while data := os.read(self.read_fd, 64):
                with self._changed:
                    now = time.monotonic()
                    for b in data:
                        self.seen[b] = now
                    self._changed.notify_all()
        except OSError:
            pass
        finally:
            os.close(self.read_fd)

    def got(self, signum: int, since: float, wait_s: float) -> bool:
        """Whether the child received `signum` at or after `since`, waiting up to wait_s for word of it
        (its C handler writes at delivery; the byte may still be on its way)."""
        deadline = time.monotonic() + wait_s
        with self._changed:
            while self.seen.get(signum, -1.0) < since:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True


# A signal sent to the whole process group reaches the child and the parent at once; word of the
# child's copy takes a thread switch or two. Longer than that on a loaded machine, short enough that
# a stop meant for perfcore alone is passed on without a wait anyone notices.
GROUP_SIGNAL_WAIT_S = 0.2


def run_child(
    cmd: list[str], env: dict[str, str], stdout_to_stderr: bool = False, on_start: Callable[[], Any] | None = None
) -> int:
    """Runs the command and waits for it to write its results. A signal meant to stop the run reaches
    the child once, however it was sent: Ctrl-C in the terminal and a signal to the process group
    reach the child by themselves (the child's Python says so on a pipe); SIGINT to perfcore's pid
    alone and SIGTERM are passed on; SIGHUP (the terminal closed, ssh dropped) is passed on as
    SIGTERM, so the script writes its results instead of training on as an orphan. A second copy
    would land in the script's own KeyboardInterrupt handling, or in perfcore's writing of results.
    perfcore itself stays to finish the run folder from what the script wrote.
    stdout_to_stderr: the script's output goes to stderr (stdout carries perfcore's JSON).
    on_start: called once the script's process exists."""
    signals = _ChildSignals()
    env = {**env, protocol.ENV_SIGNAL_FD: str(signals.write_fd)}
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=2 if stdout_to_stderr else None, pass_fds=(signals.write_fd,))
    except BaseException:
        os.close(signals.write_fd)
        os.close(signals.read_fd)
        raise
    signals.start()
    if on_start is not None:
        on_start()

    def forward(signum, frame):
        if proc.poll() is not None or _tty_sent(signum):
            return
        # This handler runs after the signal arrived, by however long the interpreter took to get here.
        if signals.got(signum, time.monotonic() - 0.5, GROUP_SIGNAL_WAIT_S):
            return  # the child got this one too: it was sent to the group
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    old = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        rc = proc.wait()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return 128 - rc if rc < 0 else rc


def run_command(
    cmd: list[str],
    settings: RunSettings,
    *,
    out: Path | None,
    quiet: bool = False,
    stdout_to_stderr: bool = False,
) -> tuple[int, RunReport, Path]:
    """`perfcore run`: the command run with perfcore's instrumentation, then its run folder finished: (the
    script's exit code, the run, the folder). quiet: no status line; stdout_to_stderr: the script's output
    goes to stderr (stdout carries perfcore's JSON)."""
    settings.check()
    check_command(cmd)
    # RANK/WORLD_SIZE/LOCAL_RANK left in the shell: a bad one is said once; the script's process then
    # keys its results by pid (protocol.part_key) instead of losing them.
    for line in protocol.launcher_env()[1]:
        print(line, file=sys.stderr)
    job = job_of(cmd)  # one node (or task) of a job across machines: the job's folder, joined
    out = prepare_job_out(out, job.digest) if job else prepare_out(out)
    if job:
        register(out)
    sampler = None
    if settings.monitor_s:
        from perfcore.capture.sampler import Sampler

        sampler = Sampler(settings.monitor_s)  # checks the interval now; samples once the script's process exists
    oom_before = oom_kills()
    from perfcore.run.status import LiveStatus

    from perfcore.capture.interference import InterferenceSampler

    # Other processes' CPU, steal and the run queue while the script runs, sampled from here so that
    # the script's own tree (its main process one level down, its workers below) is told apart.
    others = InterferenceSampler(pid=os.getpid(), interval_s=0.25, gpu=settings.backend != "cpu").start()
    status = LiveStatus(out, quiet=quiet).start()  # a status line while it runs, on a terminal only
    # What finishing imports, loaded while the script runs (nothing before it starts) and as it ends.
    # A job's folder may hold other nodes' parts, theirs to finish: only a run of this machine's alone.
    warm = WarmUp(ending=results_begun(out), ahead=(lambda: _finish_whole_parts(out)) if job is None else None)

    def started() -> None:
        if sampler is not None:
            sampler.start()
        warm.start()

    try:
        config = child_config(out, settings, job=job)
        rc = run_instrumented(cmd, config, stdout_to_stderr=stdout_to_stderr, on_start=started)
    finally:
        warm.stop()
        status.stop()
        samples = sampler.stop() if sampler else None
        interference = others.stop()
    from perfcore.run.parent.finish import finish_run

    with _finishing():
        try:
            evidence = {"samples": samples, "oom": (oom_before, oom_kills()), "interference": interference}
            if job is None:
                doc = finish_run(out, rc, cmd, **evidence)
            else:
                doc, shown, state = finish_job(out, rc, cmd, job, **evidence)
                if state is not None:
                    print(job_waits_line(out, shown, state), file=sys.stderr)
                out = shown
        except RunFailed as e:
            if job is not None:
                raise  # a job's folder holds other nodes' results: never offered to the next run, never theirs to count
            lost = lost_results(out)
            if lost is None:
                mark_failed(out)  # no results: the next run of this user may take the folder
                raise
            # Steps it could not write (a full disk): said so, and the folder is never offered to the next run.
            raise RunFailed(results_lost(e.exit_code, lost, out), exit_code=e.exit_code) from None
        except ResultWriteError as e:
            # The parts are whole; the disk filled while the run's own files were written: the script's
            # exit code stands, and the line says how to finish the folder without training again.
            raise RunFailed(results_unfinished(rc, e.path, e.why, out), exit_code=rc) from None
    return rc, doc, out


def _finish_whole_parts(out: Path) -> None:
    from perfcore.run.parent.finish import finish_whole_parts

    finish_whole_parts(out)


def job_waits_line(out: Path, view: Path, state: dict[str, Any]) -> str:
    """What a parent that did not complete the job says under its node's view: where the job's report
    goes, and what it waits for."""
    waits = (
        f"rank(s) {', '.join(map(str, state['missing']))} of {state['world_size']} not done yet"
        if state["missing"]
        else "no rank's results seen yet"
    )
    return (
        f"perfcore: this node's view is in {view}; the job's report goes into {out} when the last of its nodes "
        f"finishes ({waits}). A node that ran without perfcore or died never finishes: then `perfcore report "
        f"{out}` writes it from what is there, or `perfcore merge` joins the nodes' folders"
    )


class _finishing:
    """While the run folder is written: the rest of a burst of Ctrl-C (pressed impatiently, and sent
    to the group, which the script has already died of) does not throw the results away. A Ctrl-C a
    moment later still stops perfcore; `perfcore report` finishes the folder from its parts then."""

    BURST_S = 1.0

    def __enter__(self):
        t0 = time.monotonic()

        def on_int(signum, frame):
            if time.monotonic() - t0 > self.BURST_S:
                raise KeyboardInterrupt

        self.old = signal.signal(signal.SIGINT, on_int)
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.old)
        return False
