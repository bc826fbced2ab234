"""One measured run of a Workload: a fresh DataLoader, N steps after warm-up, timed with
StepTimer and sampled with the Sampler. Every experiment is built from this."""

from __future__ import annotations

import itertools
import math
import os
import time
from typing import Any, Callable


from perfcore.analysis.advice import advise_run
from perfcore.analysis.checks import step_sem_ms
from perfcore.analysis.interference import interference_finding
from perfcore.analysis.run_report import RunReport
from perfcore.capture.interference import InterferenceSampler
from perfcore.capture.sampler import Sampler, add_per_step
from perfcore.errors import UsageError
from perfcore.experiments.dataset_profile import worker_profile
from perfcore.analysis.command_results import WorkerProfile
from perfcore.experiments.measurement import SETTINGS, Measurement, Settings, Trial
from perfcore.timing import StepTimer
from perfcore.workloads import Workload

__all__ = [
    "measure_workload",
    "WorkloadRunner",
    "as_runner",
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


DEFAULT_INTERVAL_S = 0.1  # the sampler's interval where the trial names none


class _Loop:
    """One measured loop of a workload: its model on the device, its batches (loaded, or replayed from device
    memory), timed by a StepTimer; `it` is the DataLoader iterator in use, whose workers end with the loop
    however it ends."""

    def __init__(self, workload: Workload, trial: Trial) -> None:
        self.workload, self.trial = workload, trial
        self.device = resolve_device(workload)
        self.model = workload.model.to(self.device)
        self.model.train(trial.train)
        given = dict(trial.overrides) if trial.overrides else {}
        self.settings = {**workload.loader_settings(), **{k: v for k, v in given.items() if v is not None}}
        self.loader = workload.loader(**given)
        self.non_blocking = bool(self.settings["pin_memory"]) and self.device == "cuda"
        self.timer = StepTimer(device=self.device, warmup=trial.warmup)
        self.total = trial.warmup + trial.steps
        self.it = None
        self.samples_seen = 0  # in the measured steps

    def measurement(self, **figures: Any) -> Measurement:
        """This loop's measurement: its device, settings, decoder and data, with the figures given."""
        settings = Settings(**{k: self.settings[k] for k in SETTINGS})
        return Measurement(
            self.device, settings=settings, decoder=self.workload.decoder, synthetic=self.trial.synthetic, **figures
        )

    def batches(self):
        return self._replayed() if self.trial.synthetic else self._cycled()

    def _replayed(self):
        """ "Synthetic data" = batches already fetched, replayed from device memory: no loading at all."""
        import torch

        self.it = iter(self.loader)
        replay = [_to(b, self.device, False) for b in itertools.islice(self.it, min(8, self.total))]
        self.close()
        if not replay:
            raise UsageError(f"workload {self.workload.name!r}: the loader produced no batch")
        if self.device == "cuda":
            torch.cuda.synchronize()
        return (replay[i % len(replay)] for i in range(self.total))

    def _cycled(self):
        """The loader's batches, epoch after epoch."""
        while True:
            self.it = iter(self.loader)
            got = False
            for b in self.it:
                got = True
                yield b
            if not got:
                raise UsageError(
                    f"workload {self.workload.name!r}: the loader produced no batch "
                    f"(dataset of {len(self.workload.dataset)} < batch size {self.settings['batch_size']}?)"
                )

    def run(self, progress: Callable[[int, int], None] | None) -> tuple[float, float]:
        """The steps (warm-up first): (wall seconds, this process's CPU seconds) over them."""
        import torch

        timer, device, warmup = self.timer, self.device, self.trial.warmup
        opt = self.workload.optimizer if self.trial.train else None
        t_start, cpu0 = time.perf_counter(), time.process_time()
        for i, batch in enumerate(timer.load(self.batches())):
            with timer.transfer():
                if not self.trial.synthetic:
                    batch = _to(batch, device, self.non_blocking)
            with timer.compute():
                self._train_step(batch, opt)
            if device == "cuda" and i == self.total - 1:
                torch.cuda.synchronize()
            timer.step()
            if i >= warmup:
                self.samples_seen += _batch_len(batch)
            if progress:
                progress(i + 1, self.total)
            if i + 1 >= self.total:
                break
        return time.perf_counter() - t_start, time.process_time() - cpu0

    def _train_step(self, batch, opt) -> None:
        x, y = (batch[0], batch[1]) if isinstance(batch, (list, tuple)) else (batch, None)
        out = self.model(x)
        loss = self.workload.loss_fn(out, y) if y is not None else self.workload.loss_fn(out)
        if opt is not None:
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    def close(self) -> None:
        if self.it is not None:
            shutdown_loader(self.it)
        self.it = None


def measure_workload(
    workload: Workload, trial: Trial, progress: Callable[[int, int], None] | None = None
) -> Measurement:
    """Runs the workload for the trial's steps after its warm-up and measures them: the step, throughput, how
    busy the device was, the host's CPU, peak memory, the breakdown and the run with its steps table (or the
    out-of-memory error that ended it). trial.decide: judge this run's verdict and advice (once, on its facts
    and the evidence only this runner has); False for a run whose numbers feed a decision made elsewhere
    (diagnose's experiments), which then holds an undecided verdict."""
    import torch

    if trial.steps <= 0:
        raise UsageError(f"steps must be > 0, got {trial.steps}")
    loop = _Loop(workload, trial)
    interval_s = trial.interval_s or DEFAULT_INTERVAL_S
    if loop.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    sampler = Sampler(interval_s).start()
    # Beside it, what else used the machine: this process is the run (its workers are its children).
    others = InterferenceSampler(interval_s=max(interval_s, 0.1), gpu=loop.device == "cuda").start()
    try:
        elapsed, loop_cpu_s = loop.run(progress)
    except RuntimeError as e:  # torch.OutOfMemoryError is one
        if not isinstance(e, torch.OutOfMemoryError) and "out of memory" not in str(e).lower():
            raise
        if loop.device == "cuda":
            torch.cuda.empty_cache()
        return loop.measurement(
            steps=0, step_ms=math.nan, cpu_percent=math.nan, peak_mem_bytes=0, oom=True, error=str(e).splitlines()[0]
        )
    finally:
        frame = sampler.stop()
        others_samples = others.stop()
        loop.close()
    table = loop.timer.summary()
    if len(frame):  # the sampler's readings beside the steps, as `perfcore run`'s steps.csv has them
        ends = loop.timer.engine.step_table()
        add_per_step(table, frame, ends["start_ns"].to_numpy(), ends["wall_ns"].to_numpy())
    res = loop.timer.engine.document()  # the run's facts: decided below, once, with the evidence only this runner has
    res["loaders"] = [_loader_facts(loop, res)]
    interference = interference_finding(others_samples, cores=os.cpu_count() or 1, clock_ticks=os.sysconf("SC_CLK_TCK"))
    if interference:
        res["interference"] = interference
    # The cores the loop's compute keeps busy (this process's CPU over the loop: torch's intra-op threads
    # included, workers not), which DataLoader workers would have to share: kept with the run's facts, so
    # advice given again on the run (diagnose's) is keyed to them too.
    cores = loop_cpu_s / elapsed if elapsed > 0 else None
    res["advice_facts"].update(cpu_count=os.cpu_count(), torch_threads=torch.get_num_threads(), loop_cpu_cores=cores)
    decision = advise_run(res, zero_code=True) if trial.decide and res["steps"] else None
    run = RunReport.of(res, decision)
    shares = {"breakdown_ms": run.breakdown_ms.as_dict(), "breakdown_fraction": run.breakdown_fraction.as_dict()}
    return loop.measurement(**_figures(loop, table, frame, sampler.has_gpu, interval_s), **shares, run=run, table=table)


def _figures(loop: _Loop, table, frame, has_gpu: bool, interval_s: float) -> dict[str, Any]:
    """The measurement's figures over the measured steps: the step, its throughput, how busy the device was,
    the host's CPU and peak memory."""
    import torch

    steady = table[~table["warmup"]]
    step_ms = float(steady["wall_ms"].mean()) if len(steady) else float("nan")
    if has_gpu:
        busy = steady_samples(frame, loop.timer.engine.step_table(), table["warmup"].to_numpy())["gpu_util"]
        busy, busy_source = busy.to_numpy(float), "gpu_util"
    else:
        # No GPU to sample: the device is "busy" while the loop computes (compute share per step).
        busy = (steady["compute_ms"] / steady["wall_ms"]).to_numpy(dtype=float)
        busy_source = "compute_share"
    return {
        "steps": int(len(steady)),
        "step_ms": step_ms,
        # The standard error of the mean step: how far a second run of the same loop may land.
        "step_sem_ms": step_sem_ms(steady["wall_ms"].to_numpy()),
        "samples_per_s": float(loop.samples_seen / steady["wall_ms"].sum() * 1e3) if len(steady) else 0.0,
        "busy_source": busy_source,
        "busy_series": tuple(map(float, busy)),
        "busy_spacing_s": interval_s if busy_source == "gpu_util" else (step_ms / 1e3 if step_ms == step_ms else 0),
        "cpu_percent": float(frame["cpu_percent"].mean()) if len(frame) else float("nan"),
        "peak_mem_bytes": int(torch.cuda.max_memory_allocated()) if loop.device == "cuda" else _rss(),
    }


def _loader_facts(loop: _Loop, res: dict[str, Any]) -> dict[str, Any]:
    """The workload's DataLoader is the user's code here: advice names it and its settings. With no
    workers the main process makes each batch, so its wait is the time to make one."""
    settings = loop.settings  # the workload's loader_settings, as this loop changed them
    return {
        "workload": loop.workload.name,  # the loader is the workload's (report.words.findings names it)
        **settings,
        "worker_batch_ms": res["breakdown_ms"]["load"]
        if not settings["num_workers"] and not loop.trial.synthetic
        else None,
        "decoder": loop.workload.decoder,  # decoder advice only where images are decoded
    }


def _rss() -> int:
    import psutil

    return int(psutil.Process(os.getpid()).memory_info().rss)


class WorkloadRunner:
    """A Workload measured in this process: a fresh DataLoader per measurement."""

    forward_only = True
    health_note = None
    decoder_skip = "no_other_decoder"

    def __init__(self, workload: Workload, target: str | None = None) -> None:
        self.workload = workload
        self.name = workload.name
        self.target = target or workload.name

    def measure(self, trial: Trial, progress: Callable[[int, int], None] | None = None) -> Measurement:
        w = self.workload.with_decoder(trial.decoder) if trial.decoder else self.workload
        return measure_workload(w, trial, progress)

    def own_settings(self) -> None:
        return None

    def other_decoders(self) -> list[str]:
        return [d for d in self.workload.decoders if d != self.workload.decoder]

    def worker_profile(self, baseline: Measurement) -> WorkerProfile:
        return worker_profile(self.workload)


def as_runner(what: Any, target: str | None = None) -> Any:
    """A Workload becomes the runner that measures it in this process; a runner stays as it is."""
    return WorkloadRunner(what, target) if isinstance(what, Workload) else what
