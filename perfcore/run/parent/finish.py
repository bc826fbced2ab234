"""Finishing a run: the parts every instrumented process wrote -> one run folder (run.json, steps.csv, trace, plots)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from perfcore.analysis.run_context import Outcome
from perfcore.analysis.run_report import SCHEMA, RunReport
from perfcore.capture.sampler import add_per_step
from perfcore.errors import RunFailed, UsageError
from perfcore.report import jsonio
from perfcore.report.reader import load_part, steps_file
from perfcore.run.parent.folder import prepare_out
from perfcore.run.parent.heap import give_back_freed
from perfcore.run.parent.part_dirs import (
    compress_parts,
    copy_workers,
    drop_checkpoints,
    hand_over_table,
    part_dirs,
    write_steps,
)
from perfcore.run.part_files import finish_raw
from perfcore.run.protocol import CHECKPOINT, RAW_JSON, WORKER_COLUMNS, WORKERS

__all__ = [
    "finish_run",
    "finish_unfinished",
    "merge_dirs",
    "read_parts",
    "worker_summary",
    "write_steps",
    "monitor_summary",
]


def worker_summary(
    out: Path,
    loop_step_ms: float | None,
    load_ms: float | None,
    rank: int | None = None,
    loader: int | None = None,
    skip_pids: tuple[int, ...] = (),
) -> dict[str, Any]:
    """How fast DataLoader workers produce batches (for one rank; for one loader, by its index in
    run.json's loaders, so an eval loader's batches never mix into the train loader's figures; without
    the batches a process in skip_pids loaded itself: one that only evaluated); advice.loader_plan sets
    it against the loop."""
    pattern = "*.csv" if loader is None else f"*.L{loader}.csv"
    root = out / WORKERS
    # Files the loaders wrote here, not what a link points at; a row that is not numbers is no batch.
    linked = root.is_symlink() or not root.is_dir()
    skip = {f"{pid}-main" for pid in skip_pids}
    files = (
        []
        if linked
        else sorted(f for f in root.glob(pattern) if not f.is_symlink() and f.name.split(".")[0] not in skip)
    )
    frames = []
    for f in files:
        try:
            frames.append(pd.read_csv(f, header=None, names=WORKER_COLUMNS))
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, OSError):
            continue
    if not frames:
        return {}
    w = pd.concat(frames, ignore_index=True).apply(pd.to_numeric, errors="coerce").dropna()
    if w.empty:
        return {}
    if rank is not None and (w["rank"] >= 0).any():
        w = w[w["rank"] == rank]
        if w.empty:
            return {}
    in_workers = w[w["worker"] >= 0]
    fetch_ms = (w["end_ns"] - w["start_ns"]) / 1e6
    doc: dict[str, Any] = {
        # Worker ids, not pids: without persistent_workers each epoch starts new processes.
        "num_workers": int(in_workers["worker"].nunique()),
        "batches": int(len(w)),
        "fetch_ms_mean": float(fetch_ms.mean()),
        "getitem_ms_mean": float(w["getitem_ns"].mean() / 1e6),
        "collate_ms_mean": float(w["collate_ns"].mean() / 1e6),
        "items_per_batch": float(w["items"].mean()),
    }
    return doc


def read_parts(out: Path, keep: Callable[[Path], bool] | None = None) -> list[dict[str, Any]]:
    """Every process's part, validated, or those whose folder `keep` keeps (a job's one parent's own). A part
    carries its facts only: finish_run decides once, with every process's evidence."""
    parts = []
    for d in part_dirs(out):
        if keep is not None and not keep(d):
            continue
        key = d.name
        if not (d / "run.json").is_file() and (d / RAW_JSON).is_file():
            try:
                finish_raw(d)  # a short run's process left its settling to us
            except Exception as e:  # a damaged raw part: say so, and use its checkpoint if it has one
                sys.stderr.write(f"perfcore: could not finish the part in {d}: {type(e).__name__}: {e}\n")
        if not (d / "run.json").is_file():
            if (d / CHECKPOINT / "run.json").is_file() and not (d / CHECKPOINT).is_symlink():
                d = d / CHECKPOINT  # the process died before writing its part: its last checkpoint
            else:
                continue
        # validated: a damaged part is one line naming the file
        doc, steps, raw = load_part(d, run_table=steps_file(out))
        parts.append(
            {
                "key": key,
                "dir": d,
                "doc": doc,
                "steps": steps,
                "raw": raw,
                "label": f"rank {doc['rank']}" if doc.get("rank") is not None else f"pid {doc['pid']}",
            }
        )
    return parts


def monitor_summary(samples: pd.DataFrame, steps: pd.DataFrame) -> dict[str, Any]:
    """run.json's `monitor`: means over the samples; the GPU's power and temperature (mean, max) and,
    over the measured steps that hold a sample, the spread of their per-step means."""
    doc: dict[str, Any] = {"samples": int(len(samples))}
    for c in ("cpu_percent", "gpu_util", "power_w", "temp_c"):
        v = pd.to_numeric(samples[c], errors="coerce").dropna() if c in samples else pd.Series(dtype=float)
        if len(v):
            doc[f"{c}_mean"] = float(v.mean())
            if c in ("power_w", "temp_c"):
                doc[f"{c}_max"] = float(v.max())
    # The two monitor columns before the measured rows: selecting rows of the whole table copies every column.
    steps = steps[[c for c in ("warmup", "monitor_power_w", "monitor_temp_c") if c in steps]]
    measured = steps[~steps["warmup"].to_numpy(dtype=bool)] if "warmup" in steps else steps
    per_step = {}
    for c in ("power_w", "temp_c"):
        v = pd.to_numeric(measured[f"monitor_{c}"], errors="coerce").dropna() if f"monitor_{c}" in measured else ()
        if len(v):
            per_step[c] = {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()), "steps": int(len(v))}
    if per_step:
        doc["per_step"] = per_step
    return doc


def _interference(
    samples: dict[str, list] | None, raw: dict[str, Any] | None, trainers: int = 0
) -> dict[str, Any] | None:
    """The interference finding over the measured steps (the samples that bound them, on the steps'
    monotonic clock), the script's main process one level below this launcher, or (trainers: how many
    processes the script started that train side by side) the processes below it."""
    if not samples:
        return None
    from perfcore.analysis.interference import interference_finding, window

    if raw and len(raw.get("step_start_ns", [])):
        start_s = float(raw["step_start_ns"][0]) / 1e9
        end_s = float(raw["step_start_ns"][-1] + raw["step_wall_ns"][-1]) / 1e9
        samples = window(samples, start_s, end_s)
    finding = interference_finding(
        samples, cores=os.cpu_count() or 1, clock_ticks=os.sysconf("SC_CLK_TCK"), main_depth=2 if trainers else 1
    )
    if finding is not None and trainers:
        finding["main_processes"] = trainers
    return finding


def finish_run(  # noqa: C901, PLR0912, PLR0915
    out: Path,
    rc: int,
    cmd: list[str],
    parts: list[dict[str, Any]] | None = None,
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
    from perfcore.run.parent.outcome import describe_exit, first_failed_rank
    from perfcore.run.parent.trainers import the_run, together

    give_back_freed()  # the finish's column-sized arrays go back to the OS when freed, not to the heap
    parts = read_parts(out) if parts is None else parts
    failed_first = first_failed_rank(parts)
    measured, evaluating, apart, side_by_side = the_run(parts)
    # No step anywhere: the process that saw the most (not a launcher that only imported torch).
    parts = (
        measured
        or sorted(parts, key=lambda p: -sum(v for v in (p["doc"].get("seen") or {}).values() if isinstance(v, int)))[:1]
    )
    parts.sort(key=lambda p: (p["doc"].get("rank") is None, p["doc"].get("rank") or 0))
    # The run's rows: its one process's, or every trainer's where several trained side by side (Hogwild).
    main = together(parts, evaluating) if side_by_side else parts[0] if parts else None
    doc = dict(main["doc"]) if main else {}
    if failed_first is not None and rc != 0:
        # A job's error is the rank that failed first, in its own words: not another rank's broken
        # connection to it, nor the launcher's banner.
        first = failed_first["doc"]
        doc["exit"] = {**first["exit"], "exception": f"rank {first['rank']}: {first['exit']['exception']}"}
    outcome = describe_exit(rc, (doc.get("exit") or {}).get("reason"), *oom)
    afterwards = scope == "afterwards"
    notes = [_afterwards(rc)] if afterwards else []
    if not doc.get("steps") and not doc.get("warmup_steps"):
        return _no_step(out, rc, cmd, parts, doc, outcome, notes)
    if evaluating:
        notes.insert(0, {"code": "evaluation_only", "figures": {"pids": [p["doc"].get("pid") for p in evaluating]}})
    if apart:
        said = [{"pid": p["doc"].get("pid"), "steps": p["doc"].get("steps", 0)} for p in apart]
        notes.insert(len(notes) - afterwards, {"code": "measured_apart", "figures": {"processes": said}})
    if doc.get("checkpoint"):
        figures = {"steps": doc["checkpoint"]["steps"]}
        notes.insert(len(notes) - afterwards, {"code": "from_checkpoint", "figures": figures})
    doc["notes"] = list(doc.get("notes") or []) + notes
    doc["command"] = cmd
    doc["exit_code"] = rc
    doc["outcome"] = outcome
    focus = doc  # whose numbers drive the advice: the job's slowest rank when there is one
    from perfcore.analysis.advice import advise_run, training_loader_index

    train_ix = training_loader_index(doc.get("loaders"))  # the workers' figures are the train loader's
    if not side_by_side and (len(parts) > 1 or doc.get("world_size")):
        from perfcore.analysis.ranks import clock_offsets, merge_ranks

        # The merged run: rank 0's (or the lowest present) numbers, plus every rank's and the stragglers.
        doc.update(merge_ranks(parts, node_view=scope == "node"))
        offsets = clock_offsets(parts)
        doc["clock_offsets_ns"] = offsets
        for p in parts:
            off = offsets.get(p["doc"].get("host"), 0)
            if off:
                for key in [k for k in p["raw"] if k.endswith("_ns")]:
                    p["raw"][key] = p["raw"][key] + off
        for r in doc["ranks"]:
            ws = worker_summary(out, r["step_time_ms"]["mean"], r["breakdown_ms"]["load"], r["rank"], train_ix)
            if ws:
                r["workers"] = ws
        if doc["stragglers"]:
            st = doc["stragglers"][0]
            focus = next(p["doc"] for p in parts if p["doc"].get("rank") == st["rank"])
    from perfcore.analysis.memory_findings import memory_findings

    workers = worker_summary(
        out,
        focus["step_time_ms"]["mean"],
        focus["breakdown_ms"]["load"],
        focus.get("rank"),
        train_ix,
        skip_pids=tuple(int(p["doc"].get("pid") or 0) for p in evaluating),
    )
    evidence: dict[str, Any] = {"cpu_count": os.cpu_count()}
    if workers:
        doc["workers"] = workers
    h2d = (focus.get("memcpy") or {}).get("by_direction", {}).get("h2d", {})
    n_steps = max(1, focus["steps"] + focus["warmup_steps"])
    evidence["pageable_h2d_bytes_per_step"] = h2d.get("pageable_bytes", 0) / n_steps
    evidence["pageable_h2d_ms_per_step"] = h2d.get("pageable_ms", 0.0) / n_steps
    mem = dict(doc.get("memory") or {})
    if "mem_bytes" in main["steps"] and "warmup" in main["steps"]:
        st = main["steps"][["step", "mem_bytes"]][~main["steps"]["warmup"].to_numpy(dtype=bool)]  # two columns copied
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
        doc["memory"] = {k: v for k, v in mem.items() if k != "findings"}  # its findings are the run's
        del st  # held to the end of the finish otherwise: 16 B a step
    finding = _interference(interference, main["raw"], len(parts) if side_by_side else 0)
    if finding is not None:
        doc["interference"] = finding
        evidence["loop_cpu_cores"] = finding["main_cores"]
    # The run's one verdict and advice, with the workers' side of the evidence (the child could not see it).
    decision = advise_run(doc, zero_code=True, focus=focus, evidence=evidence, memory=mem)
    files = {"run.json": "run.json", "steps.csv": "steps.csv"}
    if samples is not None:
        jsonio.write_csv(out / "monitor.csv", samples)
        files["monitor.csv"] = "monitor.csv"
        if main["raw"] and len(samples):
            add_per_step(main["steps"], samples, main["raw"]["step_start_ns"], main["raw"]["step_wall_ns"])
            from perfcore.report.plots import plot_timeline

            plot_timeline(samples, out / "monitor.png", title="sampled during the run")
            files["monitor.png"] = "monitor.png"
        doc["monitor"] = monitor_summary(samples, main["steps"])
    write_steps(main, out / "steps.csv", files, unchanged=samples is None)
    if main["raw"]:
        from perfcore.report.chrome_trace import write_trace

        write_trace(out / "trace.json", parts)
        files["trace.json"] = "trace.json"
    for p in parts:
        p["raw"] = {}  # nothing after the trace reads the parts' arrays (16 bytes a step): not held to the report
    from perfcore.report.plots import plot_breakdown, plot_kernels
    from perfcore.report.words.verdict import headline

    plot_breakdown(main["steps"], out / "breakdown.png", title=headline(decision.verdict))
    files["breakdown.png"] = "breakdown.png"
    if plot_kernels(doc.get("kernels", []), out / "kernels.png"):
        files["kernels.png"] = "kernels.png"
    if len(doc.get("ranks", [])) > 1:
        from perfcore.report.plots import plot_ranks

        plot_ranks(doc["ranks"], out / "ranks.png")
        files["ranks.png"] = "ranks.png"
    if len(doc.get("ranks", [])) > 1 or side_by_side:
        for p in parts:
            # load_part checked the rank is an integer and _part_dirs the key's form: the name stays a
            # file name in this folder.
            rank = p["doc"].get("rank")
            jsonio.write_csv(
                out / (f"steps_rank{int(rank)}.csv" if rank is not None else f"steps_{p['key']}.csv"), p["steps"]
            )
    files["report.html"] = "report.html"
    doc["files"] = files
    from perfcore.report.html import write_report

    report = RunReport.of(doc, decision)
    jsonio.write(out / "run.json", report.to_dict())
    write_report(out, report, main["steps"])
    drop_checkpoints(out, parts)
    hand_over_table(out, main)
    compress_parts(out, parts)
    return report


def _afterwards(rc: int) -> dict[str, Any]:
    return {"code": "finished_afterwards", "figures": {"exit_code": rc}}


def _no_step(
    out: Path,
    rc: int,
    cmd: list[str],
    parts: list[dict[str, Any]],
    doc: dict[str, Any],
    outcome: dict[str, Any],
    notes: list[dict[str, Any]],
) -> RunReport:
    """A run that saw no step: RunFailed when the script failed (how it ended is the whole story), else a
    run.json saying what was seen."""
    from perfcore.analysis.run_context import NoStep
    from perfcore.report.words.runs import outcome_sentence
    from perfcore.report.words.findings import no_step_sentence
    from perfcore.run.parent.outcome import STEP_HEADER, before_first_step

    facts = doc.get("no_step")
    seen = (
        no_step_sentence(NoStep(**facts))
        if isinstance(facts, dict)
        else "no instrumented Python process imported torch: perfcore looks for "
        "optimizer steps, backward passes, DataLoader batches and module calls"
    )
    said = outcome_sentence(Outcome(**outcome))
    if rc != 0 and not parts and outcome["signal"]:
        raise RunFailed(
            f"the command {said}; a process killed so cannot write its results, so perfcore has none from it",
            exit_code=rc,
        )
    looked = {k: v for k, v in (doc.get("seen") or {}).items() if k in ("forward", "backward", "batch_all")}
    if rc != 0 and (not any(looked.values()) or (doc.get("exit") or {}).get("exception")):
        # Nothing looked like a step, or the script's own error ended it: how it ended is the whole
        # story (step-source advice cannot help), in the error's first line.
        raise RunFailed(before_first_step(rc, doc.get("exit") or {}), exit_code=rc)
    if rc != 0:
        raise RunFailed(f"the command {said} before perfcore saw a training step ({seen})", exit_code=rc)
    zeros = {"load": 0.0, "transfer": 0.0, "compute": 0.0, "comm": 0.0, "host": 0.0}
    doc.update(
        {
            "schema": SCHEMA,
            "backend": doc.get("backend", "none"),
            "device": doc.get("device", "none"),
            "steps": 0,
            "warmup_steps": 0,
            "step_time_ms": {"mean": 0.0, "p50": 0.0, "p90": 0.0},
            "breakdown_ms": dict(zeros),
            "breakdown_fraction": dict(zeros),
            "command": cmd,
            "exit_code": rc,
            "outcome": outcome,
            "notes": list(doc.get("notes") or []) + notes,
            "files": {"run.json": "run.json", "steps.csv": "steps.csv"},
        }
    )
    report = RunReport.of(doc)
    jsonio.write_text(out / "steps.csv", STEP_HEADER)
    jsonio.write(out / "run.json", report.to_dict())
    return report


# How a part says its process ended -> the exit code a shell would have shown for it.
_CODE_OF = {"finished": 0, "steps reached": 0, "interrupted": 130, "terminated": 143, "crashed": 1}


def finish_unfinished(out: Path) -> RunReport:
    """A run folder perfcore was stopped before finishing (perfcore itself killed, its terminal
    closed, Ctrl-C while it wrote, a full disk): run.json and the rest, made from the parts and
    checkpoints its processes wrote, as `perfcore run` would have. The script's exit code was never
    seen, so the one its part reports stands in for it, and a note says so."""
    from perfcore.errors import BadResultFile
    from perfcore.run.parent.folder import drop_dead_settings, is_run_folder, live_run

    out = Path(out)
    alive = live_run(out)
    if alive:
        # Its run writes the results itself when it ends; finishing now would report it as killed.
        raise BadResultFile(
            out,
            f"belongs to a run that is still going ({alive} is alive); nothing was written",
            "wait for it to end, it finishes the folder itself (or stop it, then run perfcore report again)",
            exit_code=1,
        )
    drop_dead_settings(out)  # what its killed perfcore could not remove, where the folder proves it is its own
    parts = read_parts(out)
    if not parts:
        if is_run_folder(out):
            raise BadResultFile(
                out,
                "is a perfcore run folder, but its script left no results in it (killed "
                "before perfcore could write any, or it never reached torch)",
                "run the script again",
                exit_code=1,
            )
        raise BadResultFile(out, "is not a perfcore run folder (no run.json)", exit_code=2)
    doc0 = parts[0]["doc"]
    reason = (doc0.get("exit") or {}).get("reason")
    rc = _CODE_OF.get(reason, 1) if not doc0.get("checkpoint") else 137
    cmd = doc0.get("command") or doc0.get("argv") or []
    return finish_run(out, rc, cmd, parts, scope="afterwards")


def merge_dirs(dirs: list[Path], out: Path | None) -> tuple[RunReport, Path]:
    """`perfcore merge`: parts written on several nodes of one job -> one run folder (the run, its folder)."""
    parts, seen = [], set()
    for d in dirs:
        found = read_parts(Path(d))
        if not found:
            raise UsageError(f"{d} holds no perfcore parts (parts/rank*/run.json)")
        for p in found:
            key = (p["doc"].get("rank"), p["doc"].get("host"), p["doc"].get("pid"))
            if key not in seen:
                seen.add(key)
                parts.append(p)
    from perfcore.analysis.ranks import job_problem

    problem = job_problem(parts)
    if problem:
        from perfcore.report.words.jobs import job_problem_words

        raise UsageError(job_problem_words(problem))
    out = prepare_out(out, "merge")  # only now: a refused merge leaves no folder behind
    copy_workers([Path(d) for d in dirs], out)  # the nodes' DataLoader figures, as each node's folder had them
    cmd = parts[0]["doc"].get("command") or parts[0]["doc"].get("argv") or []
    return finish_run(out, 0, cmd, parts), out
