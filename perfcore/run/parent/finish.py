"""Finishing a run: the parts every instrumented process wrote -> one run folder (run.json, steps.csv, trace, plots)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import pandas as pd

from perfcore.analysis.advice import advise_run
from perfcore.analysis.labels import LABELS
from perfcore.analysis.loader_plan import training_loader_index
from perfcore.analysis.process_part import Part
from perfcore.analysis.run_context import Exit, Outcome
from perfcore.analysis.run_report import SCHEMA, Decision, RunReport
from perfcore.capture.sampler import add_per_step
from perfcore.errors import RunFailed
from perfcore import jsonio
from perfcore.analysis.reader import load_part, steps_file
from perfcore.run.parent.evidence import interference_of, monitor_summary, worker_summary
from perfcore.run.parent.heap import give_back_freed
from perfcore.run.parent.part_dirs import (
    compress_parts,
    drop_checkpoints,
    hand_over_table,
    part_dirs,
    write_steps,
)
from perfcore.run.part_files import finish_raw
from perfcore.run.protocol import CHECKPOINT, RAW_JSON

__all__ = ["finish_run", "finish_whole_parts", "read_parts", "write_steps"]


def read_parts(out: Path, keep: Callable[[Path], bool] | None = None) -> list[Part]:
    """Every process's part, validated and parsed once, or those whose folder `keep` keeps (a job's one
    parent's own). A part carries its facts only: finish_run decides once, with every process's evidence."""
    parts = []
    for d in part_dirs(out):
        if keep is not None and not keep(d):
            continue
        key = d.name
        try:
            _finish_raw(d)  # a short run's process left its settling to us
        except Exception as e:  # a damaged raw part: say so, and use its checkpoint if it has one
            sys.stderr.write(f"perfcore: could not finish the part in {d}: {type(e).__name__}: {e}\n")
        if not (d / "run.json").is_file():
            if (d / CHECKPOINT / "run.json").is_file() and not (d / CHECKPOINT).is_symlink():
                d = d / CHECKPOINT  # the process died before writing its part: its last checkpoint
            else:
                continue
        # validated: a damaged part is one line naming the file
        doc, steps, raw = load_part(d, run_table=steps_file(out))
        parts.append(Part.parse(doc, steps, raw, key=key, dir=d))
    return parts


def finish_whole_parts(out: Path) -> None:
    """The raw parts already whole (raw.json, written last, is there) settled and written as read_parts
    would, while their processes may still be exiting (an interpreter's own shutdown took seconds on a busy
    machine): read_parts then reads them as written. A part that fails is left for read_parts to say so."""
    for d in part_dirs(out):
        try:
            _finish_raw(d)
        except Exception:  # noqa: BLE001 - read_parts tries it again and says what failed
            continue


def _finish_raw(d: Path) -> None:
    """A raw part (raw.json, written last, is there) settled and written; a written part is left as it is."""
    if not (d / "run.json").is_file() and (d / RAW_JSON).is_file():
        finish_raw(d)


@dataclass
class _Finish:
    """One run's finish as its steps go: what finish_run's steps read, and what each leaves to the next."""

    out: Path
    rc: int
    cmd: list[str]
    scope: str
    parts: list[Part]  # the run's processes, ranks in order
    evaluating: list[Part]  # processes that only evaluated
    apart: list[Part]  # processes measured apart from the run
    side_by_side: bool  # trainers side by side (Hogwild): one table, no ranks
    main: Part | None  # the run's rows: its one process's, or the trainers' together
    doc: dict[str, Any]  # the run's document as the finish builds it, from main's
    train_loader: int | None  # the index of the training loader in doc's loaders: the workers' figures are its
    ended: Exit = Exit()  # how the run's process ended, or the rank that failed first
    focus: Part | None = None  # the rank whose numbers drive the advice (a straggler), else the run's own
    evidence: dict[str, Any] = field(default_factory=dict)  # what only the parent sees, for the decision
    memory: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=lambda: {"run.json": "run.json", "steps.csv": "steps.csv"})
    added: tuple[str, ...] = ()  # the columns the finish appended to the main part's rows (the monitor's)

    @property
    def ranked(self) -> bool:
        """Ranks of one job (not trainers side by side): merged, each rank's numbers kept."""
        return not self.side_by_side and (len(self.parts) > 1 or bool(self.main and self.main.world_size))

    @property
    def stepped(self) -> bool:
        return self.main is not None and self.main.stepped


def finish_run(
    out: Path,
    rc: int,
    cmd: list[str],
    parts: list[Part] | None = None,
    samples: pd.DataFrame | None = None,
    oom: tuple[int | None, int | None] = (None, None),
    interference: dict[str, list] | None = None,
    scope: str = "run",
) -> RunReport:
    """Parts -> run folder, and the run's one decision on every process's evidence. A run that saw no step
    still gets a run.json saying what was seen; RunFailed (with the script's exit code) only when the script
    failed and there is nothing to report. scope "node": the parts are one node's of a job across machines (its
    other ranks are the job's report's to miss); "afterwards": finished by `perfcore report` from the parts,
    after perfcore stopped (the exit code is the one the parts imply, and a note says so)."""
    from perfcore.run.parent.outcome import first_failed_rank

    give_back_freed()  # the finish's column-sized arrays go back to the OS when freed, not to the heap
    parts = read_parts(out) if parts is None else parts
    run = _choose(out, rc, cmd, parts, scope)
    outcome, notes = _ending(run, first_failed_rank(parts), oom)
    if not run.stepped:
        return _no_step(run, outcome, notes)
    _note_processes(run, notes, outcome)
    if run.ranked:
        _merge_ranks(run)
        _shift_clocks(run)
    _gather_evidence(run, interference)
    focus = run.focus.doc if run.focus else run.doc
    decision = advise_run(run.doc, zero_code=True, focus=focus, evidence=run.evidence, memory=run.memory)
    if samples is not None:
        _write_monitor(run, samples)
    _write_tables(run)
    _write_plots(run, decision)
    _write_process_tables(run)
    report = _write_report(run, decision)
    _clean_up(run)
    return report


def _choose(out: Path, rc: int, cmd: list[str], parts: list[Part], scope: str) -> _Finish:
    """Which processes are the run, and whose rows are its own."""
    from perfcore.run.parent.trainers import the_run, together

    measured, evaluating, apart, side_by_side = the_run(parts)
    # No step anywhere: the process that saw the most (not a launcher that only imported torch).
    chosen = measured or sorted(parts, key=lambda p: -p.seen_calls)[:1]
    chosen.sort(key=lambda p: (p.rank is None, p.rank or 0))
    # The run's rows: its one process's, or every trainer's where several trained side by side (Hogwild).
    main = together(chosen, evaluating) if side_by_side else chosen[0] if chosen else None
    doc = dict(main.doc) if main else {}
    train = training_loader_index(main.loaders if main else None)
    ended = main.exit if main else Exit()
    return _Finish(out, rc, cmd, scope, chosen, evaluating, apart, side_by_side, main, doc, train, ended)


def _ending(
    run: _Finish, failed_first: Part | None, oom: tuple[int | None, int | None]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """How the run ended (its outcome; failed_first: the process of any part that failed first), and the
    notes every run gets."""
    from perfcore.run.parent.outcome import describe_exit

    if failed_first is not None and run.rc != 0:
        # A job's error is the rank that failed first, in its own words: not another rank's broken
        # connection to it, nor the launcher's banner.
        said = f"rank {failed_first.rank}: {failed_first.exit.exception}"
        run.doc["exit"] = {**failed_first.doc["exit"], "exception": said}
        run.ended = replace(failed_first.exit, exception=said)
    outcome = describe_exit(run.rc, run.ended.reason, *oom)
    afterwards = {"code": "finished_afterwards", "figures": {"exit_code": run.rc}}
    return outcome, [afterwards] if run.scope == "afterwards" else []


def _note_processes(run: _Finish, notes: list[dict[str, Any]], outcome: dict[str, Any]) -> None:
    """The notes on which processes are the run (the afterwards note stays last), the command and its end."""
    doc, last = run.doc, len(notes)
    if run.evaluating:
        notes.insert(0, {"code": "evaluation_only", "figures": {"pids": [p.pid for p in run.evaluating]}})
    if run.apart:
        said = [{"pid": p.pid, "steps": p.steps} for p in run.apart]
        notes.insert(len(notes) - last, {"code": "measured_apart", "figures": {"processes": said}})
    if run.main.checkpoint is not None:
        figures = {"steps": run.main.checkpoint.steps}
        notes.insert(len(notes) - last, {"code": "from_checkpoint", "figures": figures})
    doc["notes"] = list(run.main.notes) + notes
    doc.update(command=run.cmd, exit_code=run.rc, outcome=outcome)


def _merge_ranks(run: _Finish) -> None:
    """The merged run: rank 0's (or the lowest present) numbers, plus every rank's (with its workers' figures)
    and the stragglers; the slowest rank's numbers drive the advice."""
    from perfcore.analysis.ranks import merge_ranks

    doc = run.doc
    doc.update(merge_ranks(run.parts, node_view=run.scope == "node"))
    for r in doc["ranks"]:
        ws = worker_summary(run.out, r["rank"], run.train_loader)
        if ws:
            r["workers"] = ws
    if doc["stragglers"]:
        st = doc["stragglers"][0]
        run.focus = next(p for p in run.parts if p.rank == st["rank"])


def _shift_clocks(run: _Finish) -> None:
    """Every host's clock put on the job's: the parts' timestamps shifted by their host's offset."""
    from perfcore.analysis.ranks import clock_offsets

    offsets = clock_offsets(run.parts)
    run.doc["clock_offsets_ns"] = offsets
    for p in run.parts:
        off = offsets.get(p.host, 0)
        if off:
            for key in [k for k in p.raw if k.endswith("_ns")]:
                p.raw[key] = p.raw[key] + off


def _gather_evidence(run: _Finish, interference: dict[str, list] | None) -> None:
    """The workers' side of the evidence (the child could not see it), pageable copies a step, memory's
    findings over the measured steps and the machine's interference."""
    doc, main = run.doc, run.main
    focus = run.focus or main
    skip = tuple(p.pid or 0 for p in run.evaluating)
    workers = worker_summary(run.out, focus.rank, run.train_loader, skip_pids=skip)
    run.evidence["cpu_count"] = os.cpu_count()
    if workers:
        doc["workers"] = workers
    pageable_bytes, pageable_ms = focus.pageable_h2d
    n_steps = max(1, focus.steps + focus.warmup_steps)
    run.evidence["pageable_h2d_bytes_per_step"] = pageable_bytes / n_steps
    run.evidence["pageable_h2d_ms_per_step"] = pageable_ms / n_steps
    run.memory = _memory(doc, main.table)
    finding = interference_of(interference, main.raw, len(run.parts) if run.side_by_side else 0)
    if finding is not None:
        doc["interference"] = finding
        run.evidence["loop_cpu_cores"] = finding["main_cores"]


def _memory(doc: dict[str, Any], steps: pd.DataFrame) -> dict[str, Any]:
    """The run's memory facts with their findings over the measured steps (the findings are the run's, so
    run.json's `memory` keeps the rest)."""
    mem = dict(doc.get("memory") or {})
    if "mem_bytes" not in steps or "warmup" not in steps:
        return mem
    from perfcore.analysis.memory_findings import memory_findings

    st = steps[["step", "mem_bytes"]][~steps["warmup"].to_numpy(dtype=bool)]  # two columns copied, 16 B a step
    mem = {
        **mem,
        **memory_findings(
            st["step"],
            st["mem_bytes"],
            kind=mem.get("kind", "cuda_allocated"),
            capacity_bytes=mem.get("capacity_bytes"),
            alloc_retries=mem.get("alloc_retries"),
        ),
    }
    doc["memory"] = {k: v for k, v in mem.items() if k != "findings"}
    return mem


def _write_monitor(run: _Finish, samples: pd.DataFrame) -> None:
    """monitor.csv, the samples beside each step and their plot, and run.json's monitor summary."""
    main = run.main
    jsonio.write_csv(run.out / "monitor.csv", samples)
    run.files["monitor.csv"] = "monitor.csv"
    if main.raw and len(samples):
        before = set(main.table.columns)
        add_per_step(main.table, samples, main.raw["step_start_ns"], main.raw["step_wall_ns"])
        run.added = tuple(c for c in main.table.columns if c not in before)
        from perfcore.report.plots import plot_timeline

        plot_timeline(samples, run.out / "monitor.png", title="sampled during the run")
        run.files["monitor.png"] = "monitor.png"
    run.doc["monitor"] = monitor_summary(samples, main.table)


def _write_tables(run: _Finish) -> None:
    """steps.csv and the trace of every process, after which nothing reads the parts' arrays (16 bytes a
    step): they are let go, not held to the report."""
    write_steps(run.main, run.out / "steps.csv", run.files, added=run.added)
    if run.main.raw:
        from perfcore.report.chrome_trace import write_trace

        write_trace(run.out / "trace.json", run.parts)
        run.files["trace.json"] = "trace.json"
    for p in run.parts:
        p.raw.clear()


def _write_plots(run: _Finish, decision: Decision) -> None:
    from perfcore.report.plots import plot_breakdown, plot_kernels
    from perfcore.report.words.verdict import verdict_short

    plot_breakdown(run.main.table, run.out / "breakdown.png", title=verdict_short(decision.verdict))
    run.files["breakdown.png"] = "breakdown.png"
    if plot_kernels(run.doc.get("kernels", []), run.out / "kernels.png"):
        run.files["kernels.png"] = "kernels.png"
    if len(run.doc.get("ranks", [])) > 1:
        from perfcore.report.plots import plot_ranks

        plot_ranks(run.doc["ranks"], run.out / "ranks.png")
        run.files["ranks.png"] = "ranks.png"


def _write_process_tables(run: _Finish) -> None:
    """Each rank's or side-by-side trainer's own steps table."""
    if len(run.doc.get("ranks", [])) > 1 or run.side_by_side:
        for p in run.parts:
            # load_part checked the rank is an integer and part_dirs the key's form: the name stays a
            # file name in this folder.
            name = f"steps_rank{p.rank}.csv" if p.rank is not None else f"steps_{p.key}.csv"
            jsonio.write_csv(run.out / name, p.table)


def _write_report(run: _Finish, decision: Decision) -> RunReport:
    """run.json (the facts and the decision) and report.html, once everything they name is written."""
    from perfcore.report.html import write_report

    run.files["report.html"] = "report.html"
    run.doc["files"] = run.files
    report = RunReport.of(run.doc, decision)
    jsonio.write(run.out / "run.json", report.to_dict())
    write_report(run.out, report, run.main.table)
    return report


def _clean_up(run: _Finish) -> None:
    """What the finished folder no longer needs: checkpoints, the steps table handed over, parts compressed."""
    drop_checkpoints(run.out, run.parts)
    hand_over_table(run.out, run.main)
    compress_parts(run.out, run.parts)


def _no_step(run: _Finish, outcome: dict[str, Any], notes: list[dict[str, Any]]) -> RunReport:
    """A run that saw no step: RunFailed when the script failed (how it ended is the whole story), else a
    run.json saying what was seen."""
    from perfcore.report.words.runs import no_step_sentence, outcome_sentence
    from perfcore.run.parent.outcome import STEP_HEADER, before_first_step

    out, rc, doc, main = run.out, run.rc, run.doc, run.main or Part()
    seen = (
        no_step_sentence(main.no_step)
        if main.no_step is not None
        else "no instrumented Python process imported torch: perfcore looks for "
        "optimizer steps, backward passes, DataLoader batches and module calls"
    )
    said = outcome_sentence(Outcome(**outcome))
    if rc != 0 and not run.parts and outcome["signal"]:
        raise RunFailed(
            f"the command {said}; a process killed so cannot write its results, so perfcore has none from it",
            exit_code=rc,
        )
    looked = [main.seen.get(k, 0) for k in ("forward", "backward", "batch_all")]
    if rc != 0 and (not any(looked) or run.ended.exception):
        # Nothing looked like a step, or the script's own error ended it: how it ended is the whole
        # story (step-source advice cannot help), in the error's first line.
        raise RunFailed(before_first_step(rc, run.ended), exit_code=rc)
    if rc != 0:
        raise RunFailed(f"the command {said} before perfcore saw a training step ({seen})", exit_code=rc)
    doc.setdefault("backend", "none")
    doc.setdefault("device", "none")
    doc.update(
        {
            "schema": SCHEMA,
            "steps": 0,
            "warmup_steps": 0,
            "step_time_ms": {"mean": 0.0, "p50": 0.0, "p90": 0.0},
            "breakdown_ms": dict.fromkeys(LABELS, 0.0),
            "breakdown_fraction": dict.fromkeys(LABELS, 0.0),
            "command": run.cmd,
            "exit_code": rc,
            "outcome": outcome,
            "notes": list(main.notes) + notes,
            "files": {"run.json": "run.json", "steps.csv": "steps.csv"},
        }
    )
    report = RunReport.of(doc)
    jsonio.write_text(out / "steps.csv", STEP_HEADER)
    jsonio.write(out / "run.json", report.to_dict())
    return report
