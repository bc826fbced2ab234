"""One measured run of a Workload: a fresh DataLoader, N steps after warm-up, timed with
StepTimer and sampled with the Sampler. Every experiment is built from this."""

from __future__ import annotations

import cProfile
import math
import os
import pstats
import time
from typing import Any, Callable

import numpy as np

from perfcore.analysis.advice import advise_run
from perfcore.analysis.checks import step_sem_ms
from perfcore.analysis.interference import interference_finding
from perfcore.analysis.run_report import RunReport
from perfcore.capture.interference import InterferenceSampler
from perfcore.capture.sampler import Sampler, add_per_step
from perfcore.errors import UsageError
from perfcore.experiments.measurement import SETTINGS, Measurement, Trial
from perfcore.report.words.runs import sampling_words
from perfcore.timing import StepTimer
from perfcore.workloads import Workload

__all__ = [
    "measure_workload",
    "measurement_of",
    "WorkloadRunner",
    "as_runner",
    "worker_profile",
    "resolve_device",
    "shutdown_loader",
    "steady_samples",
]


def steady_samples(frame, ends, warmup):
    """The sampler's rows inside the measured steps: start-up (imports, the first CUDA context,
    cuDNN's autotuning) and warm-up samples would bias a busy share low. All rows where no sample
    falls inside (a run shorter than the sampling interval)."""
    if not len(frame) or "t_ns" not in frame or not len(ends) or warmup.all():
        return frame
    start = ends["start_ns"].to_numpy()[~warmup]
    t = frame["t_ns"].to_numpy()
    inside = (t >= start.min()) & (t <= (start + ends["wall_ns"].to_numpy()[~warmup]).max())
    return frame[inside] if inside.any() else frame


def resolve_device(workload: Workload) -> str:
    from perfcore._native import capabilities

    want = workload.device
    if want == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() and capabilities()["features"]["cuda_events"] else "cpu"
    return "cuda" if str(want).startswith("cuda") else "cpu"


def shutdown_loader(it) -> None:
    """Ends a DataLoader iterator's worker processes now, not at garbage collection."""
    stop = getattr(it, "_shutdown_workers", None)
    if stop is not None:
        stop()


def _to(batch, device: str, non_blocking: bool):
    if hasattr(batch, "to"):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to(b, device, non_blocking) for b in batch)
    if isinstance(batch, dict):
        return {k: _to(v, device, non_blocking) for k, v in batch.items()}
    return batch


def _batch_len(batch) -> int:
    first = batch[0] if isinstance(batch, (list, tuple)) else batch
    return int(first.shape[0]) if hasattr(first, "shape") else 1


def measure_workload(  # noqa: C901, PLR0912, PLR0913, PLR0915
    workload: Workload,
    *,
    steps: int = 50,
    warmup: int = 5,
    train: bool = True,
    synthetic: bool = False,
    overrides: dict[str, Any] | None = None,
    sample_interval_s: float = 0.1,
    progress: Callable[[int, int], None] | None = None,
    decide: bool = True,
) -> dict[str, Any]:
    """Runs the workload and returns the row every experiment reports:
    step_ms, samples_per_s, busy_mean/busy_std, cpu_percent, peak_mem_bytes, oom, breakdown, steps table.
    decide: judge this run's verdict and advice (once, with the runner's evidence); False for a run whose
    numbers feed a decision made elsewhere (diagnose's experiments), which then holds an undecided verdict."""
    import torch

    if steps <= 0:
        raise UsageError(f"steps must be > 0, got {steps}")
    device = resolve_device(workload)
    model = workload.model.to(device)
    model.train(train)
    settings = {**workload.loader_settings(), **{k: v for k, v in (overrides or {}).items() if v is not None}}
    loader = workload.loader(**(overrides or {}))
    non_blocking = bool(settings["pin_memory"]) and device == "cuda"
    timer = StepTimer(device=device, warmup=warmup)
    total = warmup + steps
    row: dict[str, Any] = {
        **{k: settings[k] for k in ("batch_size", "num_workers", "pin_memory", "prefetch_factor")},
        "synthetic": synthetic,
        "decoder": workload.decoder,
        "device": device,
        "oom": False,
    }
    it = None
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    sampler = Sampler(sample_interval_s).start()
    # Beside it, what else used the machine: this process is the run (its workers are its children).
    others = InterferenceSampler(interval_s=max(sample_interval_s, 0.1), gpu=device == "cuda").start()
    samples_seen = 0
    try:
        replay: list = []
        if synthetic:
            # "Synthetic data" = batches already fetched, replayed from device memory: no loading at all.
            it = iter(loader)
            for _ in range(min(8, total)):
                try:
                    replay.append(_to(next(it), device, False))
                except StopIteration:
                    break
            shutdown_loader(it)
            it = None
            if not replay:
                raise UsageError(f"workload {workload.name!r}: the loader produced no batch")
            if device == "cuda":
                torch.cuda.synchronize()
            source = (replay[i % len(replay)] for i in range(total))
        else:

            def cycle():
                nonlocal it
                while True:
                    it = iter(loader)
                    got = False
                    for b in it:
                        got = True
                        yield b
                    if not got:
                        raise UsageError(
                            f"workload {workload.name!r}: the loader produced no batch "
                            f"(dataset of {len(workload.dataset)} < batch size {settings['batch_size']}?)"
                        )

            source = cycle()
        opt = workload.optimizer if train else None
        t_start, cpu0 = time.perf_counter(), time.process_time()
        for i, batch in enumerate(timer.load(source)):
            with timer.transfer():
                if not synthetic:
                    batch = _to(batch, device, non_blocking)
            with timer.compute():
                x, y = (batch[0], batch[1]) if isinstance(batch, (list, tuple)) else (batch, None)
                out = model(x)
                loss = workload.loss_fn(out, y) if y is not None else workload.loss_fn(out)
                if opt is not None:
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
            if device == "cuda" and i == total - 1:
                torch.cuda.synchronize()
            timer.step()
            if i >= warmup:
                samples_seen += _batch_len(batch)
            if progress:
                progress(i + 1, total)
            if i + 1 >= total:
                break
        elapsed = time.perf_counter() - t_start
    except torch.OutOfMemoryError as e:
        row.update(oom=True, error=str(e).splitlines()[0])
        if device == "cuda":
            torch.cuda.empty_cache()
        return _finish_oom(row, sampler, it)
    except RuntimeError as e:
        if "out of memory" not in str(e).lower():
            sampler.stop()
            if it is not None:
                shutdown_loader(it)
            raise
        row.update(oom=True, error=str(e).splitlines()[0])
        return _finish_oom(row, sampler, it)
    finally:
        others_samples = others.stop()
        if it is not None:
            shutdown_loader(it)
    frame = sampler.stop()
    loop_cpu_s = time.process_time() - cpu0
    interference = interference_finding(others_samples, cores=os.cpu_count() or 1, clock_ticks=os.sysconf("SC_CLK_TCK"))
    table = timer.summary()
    if len(frame):  # the sampler's readings beside the steps, as `perfcore run`'s steps.csv has them
        ends = timer.engine.step_table()
        add_per_step(table, frame, ends["start_ns"].to_numpy(), ends["wall_ns"].to_numpy())
    res = timer.engine.document()  # the run's facts: decided below, once, with the evidence only this runner has
    steady = table[~table["warmup"]]
    step_ms = float(steady["wall_ms"].mean()) if len(steady) else float("nan")
    if sampler.has_gpu:
        busy = steady_samples(frame, timer.engine.step_table(), table["warmup"].to_numpy())["gpu_util"].to_numpy(float)
        busy_source = "gpu_util"
    else:
        # No GPU to sample: the device is "busy" while the loop computes (compute share per step).
        busy = (steady["compute_ms"] / steady["wall_ms"]).to_numpy(dtype=float)
        busy_source = "compute_share"
    row.update(
        {
            "steps": int(len(steady)),
            "step_ms": step_ms,
            # The standard error of the mean step: how far a second run of the same loop may land.
            "step_sem_ms": step_sem_ms(steady["wall_ms"].to_numpy()),
            "samples_per_s": float(samples_seen / steady["wall_ms"].sum() * 1e3) if len(steady) else 0.0,
            "busy_mean": float(np.mean(busy)) if len(busy) else float("nan"),
            "busy_std": float(np.std(busy)) if len(busy) else float("nan"),
            "busy_source": busy_source,
            "busy_series": [float(b) for b in busy],
            "busy_spacing_s": sample_interval_s
            if busy_source == "gpu_util"
            else (step_ms / 1e3 if step_ms == step_ms else 0),
            "cpu_percent": float(frame["cpu_percent"].mean()) if len(frame) else float("nan"),
            "peak_mem_bytes": int(torch.cuda.max_memory_allocated()) if device == "cuda" else _rss(),
            "breakdown_ms": res["breakdown_ms"],
            "breakdown_fraction": res["breakdown_fraction"],
            "elapsed_s": elapsed,
            "sampler_note": sampling_words(sampler.nvml_error),
        }
    )
    # The workload's DataLoader is the user's code here: advice names it and its settings. With no
    # workers the main process makes each batch, so its wait is the time to make one.
    loader = {
        "workload": workload.name,  # the loader is the workload's (report.plan_words names it)
        **{
            k: settings.get(k)
            for k in ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
        },
        "worker_batch_ms": res["breakdown_ms"]["load"] if not settings["num_workers"] and not synthetic else None,
        "decoder": getattr(workload, "decoder", None),  # decoder advice only where images are decoded
    }
    res["loaders"] = [loader]
    if interference:
        res["interference"] = interference
    # The cores the loop's compute keeps busy (this process's CPU over the loop: torch's intra-op
    # threads included, workers not), which DataLoader workers would have to share.
    evidence = {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "loop_cpu_cores": loop_cpu_s / elapsed if elapsed > 0 else None,
    }
    decision = advise_run(res, zero_code=True, evidence=evidence) if decide and res["steps"] else None
    row["verdict"] = decision.verdict if decision is not None else None
    row["interference"] = interference
    row["breakdown_robust"] = res.get("breakdown_robust")
    row["evidence"] = evidence
    row["_table"] = table
    row["_result"] = RunReport.of(res, decision)
    return row


def _finish_oom(row: dict, sampler: Sampler, it) -> dict:
    sampler.stop()
    if it is not None:
        shutdown_loader(it)
    row.update(
        steps=0,
        step_ms=math.nan,
        samples_per_s=0.0,
        busy_mean=math.nan,
        busy_std=math.nan,
        cpu_percent=math.nan,
        peak_mem_bytes=0,
    )
    return row


def _rss() -> int:
    import psutil

    return int(psutil.Process(os.getpid()).memory_info().rss)


def worker_profile(workload: Workload, items: int = 48, top: int = 8) -> dict[str, Any]:
    """cProfile of dataset[i] for a few items, in this process, plus its CPU/wall ratio: a ratio
    far below 1 means __getitem__ waits (I/O), near 1 means it computes (decode, augment)."""
    ds = workload.dataset
    n = min(items, len(ds))
    prof = cProfile.Profile()
    c0, w0 = time.process_time(), time.perf_counter()
    prof.enable()
    for i in range(n):
        ds[i]
    prof.disable()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, func), (cc, nc, tt, ct, callers) in stats.stats.items():
        rows.append(
            {
                "function": f"{func} ({os.path.basename(file)}:{line})" if file != "~" else func,
                "self_ms_per_item": tt / n * 1e3,
                "total_ms_per_item": ct / n * 1e3,
                "calls": nc,
            }
        )
    rows.sort(key=lambda r: r["self_ms_per_item"], reverse=True)
    return {"items": n, "ms_per_item": wall / n * 1e3, "cpu_to_wall": cpu / wall if wall else 0.0, "top": rows[:top]}


def measurement_of(row: dict[str, Any]) -> Measurement:
    """measure_workload's row, typed."""
    return Measurement(
        device=row.get("device", "cpu"),
        steps=int(row.get("steps") or 0),
        step_ms=row.get("step_ms", math.nan),
        settings={k: row.get(k) for k in SETTINGS},
        step_sem_ms=row.get("step_sem_ms"),
        samples_per_s=row.get("samples_per_s") or 0.0,
        busy_source=row.get("busy_source", "compute_share"),
        busy_series=tuple(float(b) for b in row.get("busy_series") or ()),
        busy_spacing_s=row.get("busy_spacing_s") or 0.0,
        cpu_percent=row.get("cpu_percent"),
        peak_mem_bytes=row.get("peak_mem_bytes"),
        breakdown_ms=row.get("breakdown_ms") or {},
        breakdown_fraction=row.get("breakdown_fraction") or {},
        breakdown_robust=row.get("breakdown_robust"),
        interference=row.get("interference"),
        verdict=row.get("verdict"),
        decoder=row.get("decoder"),
        synthetic=bool(row.get("synthetic")),
        oom=bool(row.get("oom")),
        error=row.get("error"),
        run=row.get("_result"),
        evidence=row.get("evidence"),
        table=row.get("_table"),
    )


class WorkloadRunner:
    """A Workload measured in this process: a fresh DataLoader per measurement."""

    forward_only = True
    keeps_own_settings = False
    health_note = None
    decoder_skip = "no_other_decoder"

    def __init__(self, workload: Workload, target: str | None = None) -> None:
        self.workload = workload
        self.name = workload.name
        self.target = target or workload.name

    def measure(self, trial: Trial, progress: Callable[[int, int], None] | None = None) -> Measurement:
        w = self.workload.with_decoder(trial.decoder) if trial.decoder else self.workload
        kw: dict[str, Any] = {"sample_interval_s": trial.interval_s} if trial.interval_s else {}
        row = measure_workload(
            w,
            steps=trial.steps,
            warmup=trial.warmup,
            train=trial.train,
            synthetic=trial.synthetic,
            overrides=dict(trial.overrides) if trial.overrides else None,
            progress=progress,
            decide=trial.decide,
            **kw,
        )
        return measurement_of(row)

    def own_settings(self) -> dict[str, Any]:
        return {k: self.workload.loader_settings().get(k) for k in SETTINGS}

    def other_decoders(self) -> list[str]:
        return [d for d in self.workload.decoders if d != self.workload.decoder]

    def worker_profile(self, baseline: Measurement) -> dict[str, Any]:
        return worker_profile(self.workload)


def as_runner(what: Any, target: str | None = None) -> Any:
    """A Workload becomes the runner that measures it in this process; a runner stays as it is."""
    return WorkloadRunner(what, target) if isinstance(what, Workload) else what
