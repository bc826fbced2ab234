"""Writing one process's part of a run (PERFCORE_RUN_DIR/parts/<rank or pid>/) at its end: what its
hooks saw and its StepTimer's recording, written by run/part_files (here, or by the parent for a run
that settled nothing here); `perfcore run`'s parent turns the parts into the run folder. A process
that saw no step still writes what it saw."""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from perfcore import jsonio
from perfcore.run import part_files
from perfcore.run.child.exits import uncaught_reason
from perfcore.run.child.upkeep import own_costs
from perfcore.run.lines import take_facts
from perfcore.run.protocol import PARTS, WORKERS, launcher_env, part_dir, part_key

__all__ = ["write_part", "no_step_facts", "memory_limits", "optimizer_order", "ERROR_FILE"]

ERROR_FILE = "error.txt"  # the uncaught exception's traceback, in the process's part folder


def write_part(inst) -> None:
    ending = inst.ending
    ending.ended(uncaught_reason(ending.reason))  # before finalize decides how to die
    counts = dict(inst.sources.counts)
    timer = inst.timer
    source = inst.finish_sources()
    part = part_dir(inst.run_dir, part_key(inst.rank))
    part.mkdir(parents=True, exist_ok=True)
    common = _common(inst, source, counts)
    if ending.traceback:
        # The exception's first line travels in run.json; the whole of it waits in the run folder.
        jsonio.write_text(part / ERROR_FILE, ending.traceback)
        common["exit"]["traceback"] = f"{PARTS}/{part.name}/{ERROR_FILE}"
    if timer is None or not timer.engine.boundaries:
        if timer is not None:
            timer.engine.close_open_phases()
            timer.close()
        clock = inst.torch_hooks.clock
        common["no_step"] = no_step_facts(
            counts,
            (inst.now_ns() - inst.t_start) / 1e9,
            clock is not None,
            inst.sources.forced,
            bool(clock is not None and clock.clocked),
        )
        jsonio.write(part / "run.json", {"schema": "perfcore.run/2", "steps": 0, "warmup_steps": 0, **common})
        return
    _write_steps(inst, timer, part, common)


def no_step_facts(
    counts: dict[str, int], wall_s: float, torch_instrumented: bool, forced: str | None, optimizer_stepped: bool
) -> dict[str, Any]:
    """Why the process saw no step, as run.json's `no_step` keeps it (report.words.findings says it): what
    the hooks saw and for how long, whether torch was there to instrument, and the step source forced."""
    return {
        "wall_s": wall_s,
        "torch_instrumented": torch_instrumented,
        "torch_imported": "torch" in sys.modules,
        "optimizer_stepped": optimizer_stepped,
        "forced": forced,
        **{k: counts[k] for k in ("forward", "backward", "batch_all")},
    }


def _order(inst, source: str | None) -> str | None:
    """How several optimizers stepped (optimizer_order's code), where the optimizer ends the steps."""
    if source != "optimizer":
        return None
    # Rows follow the optimizer that is stepping; what that means for the others' work depends on how they
    # stepped, which the clock saw.
    facts = _clock_facts(inst)
    return optimizer_order(
        inst.sources.optimizers_made, facts.get("optimizer_handovers", 0), facts.get("other_optimizer_steps", 0)
    )


def optimizer_order(optimizers: int, handovers: int, others: int) -> str | None:
    """How several optimizers stepped, as the step clock saw it: "sequence" (stages one after the other,
    each handing the clock to the next: layer-wise training, an LR finder then training), "interleaved"
    (others stepping inside the clock optimizer's iterations: a GAN's generator after its
    discriminator), "both"; None with one optimizer, or when no other one ever stepped."""
    if optimizers < 2:
        return None
    if handovers and others:
        return "both"
    return "sequence" if handovers else "interleaved" if others else None


def _clock_facts(inst) -> dict[str, int]:
    """How the optimizer clock went: handovers to a later optimizer, and other optimizers' steps that
    ended no row (what the parent's note compares with the rows)."""
    clock = inst.torch_hooks.clock
    if clock is None:
        return {}
    return {"optimizer_handovers": int(clock.handovers), "other_optimizer_steps": int(clock.others)}


def _compiled(inst) -> bool:
    watch = inst.torch_hooks.compile_watch
    return bool(watch is not None and watch.calls)


def _launcher_notes(inst) -> None:
    """RANK, WORLD_SIZE or LOCAL_RANK that the script itself set to something unusable (the parent
    said so for the ones it was given): a note, never silence."""
    for line in launcher_env()[1]:
        if line not in inst.launcher_problems:
            note = line.removeprefix("perfcore: ").replace("; ignoring it", ", as the script set it; ignoring it", 1)
            if note not in inst.notes:
                inst.notes.append(note)
                sys.stderr.write(f"perfcore: {note}\n")  # as the parent says it for a variable it was given


def _common(inst, source: str | None, counts: dict[str, int]) -> dict[str, Any]:
    _launcher_notes(inst)
    return {
        "pid": os.getpid(),
        "rank": inst.rank,
        "nested_in": inst.nested_in,
        "started_by": _started_by(),
        "world_size": launcher_env()[0]["WORLD_SIZE"] or inst.world_size,
        "host": socket.gethostname(),
        # Which job across machines, and which perfcore run of it, this process was part of.
        "job": inst.config.job or None,
        "perfcore_pid": inst.config.launcher_pid or None,
        "argv": list(sys.argv),
        "exit": {
            "reason": inst.ending.reason,
            "exception": inst.ending.exception,
            "usage_error": inst.ending.usage_error,
            "t_exception_ns": inst.ending.t_exception,
        },
        "step_source": source,
        "optimizer_order": _order(inst, source),
        # Counted until the step source was chosen (then the hooks stop calling Python for them).
        "seen": {
            **counts,
            "optimizers": inst.sources.optimizers_made,
            **_clock_facts(inst),
            "counted_until": source or "the end",
            "wall_ms": (inst.now_ns() - inst.t_start) / 1e6,
        },
        # Whether the script compiles its model: advice never proposes torch.compile to one that does.
        "torch_compile": _compiled(inst),
        "loaders": inst.loaders.summary(inst.run_dir / WORKERS),
        **inst.loader_changes.facts(),
        **_runtime_facts(),
    }


def _started_by() -> str | None:
    """ "multiprocessing" in a process that multiprocessing started (a Process or Pool worker, by spawn or
    fork: Hogwild's trainers); the parent merges those that train. Read without importing it."""
    mp = sys.modules.get("multiprocessing")
    try:
        return "multiprocessing" if mp is not None and mp.parent_process() is not None else None
    except Exception:  # an unusual multiprocessing: the process is then told apart as before
        return None


def _runtime_facts() -> dict[str, Any]:
    """What the script set that advice must not propose again, read without importing anything: torch's
    intra-op threads, OMP_NUM_THREADS, the CPUs this process may run on, whether torch.compile
    compiled a graph, and whether the GPU has bf16."""
    torch = sys.modules.get("torch")
    dynamo = sys.modules.get("torch._dynamo.utils")
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count()
    try:
        graphs = int(dynamo.counters["stats"]["unique_graphs"]) if dynamo is not None else 0
    except Exception:  # a torch whose counters differ: say nothing rather than guess
        graphs = None
    try:  # bf16 the GPU runs natively (Ampere or newer); asked only of a CUDA the script started itself
        cuda = getattr(torch, "cuda", None)
        bf16 = bool(cuda.is_bf16_supported(including_emulation=False)) if cuda and cuda.is_initialized() else None
    except Exception:  # an older torch, a failed query: advice says bf16 as a condition
        bf16 = None
    return {
        "bf16_supported": bf16,
        "threads": {
            "torch": int(torch.get_num_threads()) if torch is not None else None,
            "omp_env": os.environ.get("OMP_NUM_THREADS"),
            "cpus": cpus,
        },
        "compiled_graphs": graphs,
    }


def _write_steps(inst, timer, part, common: dict[str, Any]) -> None:
    import psutil

    engine = timer.engine
    engine.close_open_phases()  # a crash inside a phase: close it at the crash
    if inst.on_gpu:
        import torch

        try:
            torch.cuda.synchronize()
        except Exception:
            pass
    facts = _facts(inst, common, psutil.cpu_percent(None))
    at, sampled = inst.upkeep.memory.samples.arrays()
    from perfcore.recording.replay import can_carry

    if can_carry(engine):
        # The parent, which has pandas loaded already, settles the rest and writes this part; this
        # process never pays pandas' import nor holds its whole steps table at once.
        timer.close()
        part_files.write_raw(engine, facts, at, sampled, part)
        return
    part_files.write_steps(engine, facts, at, sampled, part, close=timer.close)


def _facts(inst, common: dict[str, Any], cpu_util: float) -> dict[str, Any]:
    """What only the instrumented process knows, for the analysis that writes its part."""
    from perfcore._C import hook_errors

    untimed = hook_errors()
    if untimed:
        inst.notes.append(
            f"{untimed} hooked call(s) could not be timed (a phase would not open or close there); they ran untimed"
        )
    stop_note = inst.stop_note()
    if stop_note:
        inst.notes.append(stop_note)
    return {
        "common": common,
        "cpu_util_percent": cpu_util,
        "eval_rows": [int(r) for r in inst.eval_rows],
        "eval_passes": [[int(a), int(b)] for a, b in inst.sources.eval_passes],
        "mem_kind": inst.upkeep.memory.kind,
        "memory_limits": memory_limits(inst.upkeep.memory.kind),
        "skipped_boundaries": inst.torch_hooks.clock.skipped if inst.torch_hooks.clock is not None else 0,
        "training_batches": inst.loaders.training_batches(),
        "scaler_skipped_steps": inst.sources.scaler_skips,
        "t_start": int(inst.t_start),
        "notes": list(inst.notes),
        "backend_note": inst.backend_note,
        "requested_backend": inst.backend,
        "lines": take_facts(inst.lines),
        "own_costs": own_costs(inst),  # after the sampler stopped: its calibration is not the script's
        "optimizer": inst.sources.optimizer_facts,
    }


def memory_limits(kind: str) -> dict:
    """What memory pressure is judged by: the allocator's retries and the device's capacity on a GPU,
    the machine's RAM for peak RSS."""
    try:
        if kind == "cuda_allocated":
            import torch

            return {
                "alloc_retries": int(torch.cuda.memory_stats().get("num_alloc_retries", 0)),
                "capacity_bytes": int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory),
            }
        import psutil

        return {"capacity_bytes": int(psutil.virtual_memory().total)}
    except Exception:  # a missing figure only means no pressure finding
        return {}
