"""What a perfcore.run/1 document holds, as shapes (report.shapes): the keys every run.json has, and the
shape of each optional part the reports show. The reader checks a document against these before any
figure of it is drawn or printed."""

from __future__ import annotations

from perfcore.analysis.attribution import LABELS
from perfcore.report.shapes import ANY, FRAC, INT, MS, NUM, STR, Absent, Keys, Map, Opt, Some

__all__ = ["RUN_REQUIRED", "RUN_OPTIONAL"]

_PER_LABEL = {lb: MS for lb in LABELS}
_STEP_MS = {"mean": MS, "p50": MS, "p90": MS}
# One of the user's lines in run.json's "lines" (the report prints its figures and names).
_LINE_COST = {
    "file": STR,
    "function": STR,
    "line": INT,
    "ms_per_step": MS,
    "share": FRAC,
    "samples": INT,
    "user": ANY,
    "calls": Absent([{"method": STR, "per_step": MS}]),
}
# What a perfcore.run/1 document must hold (and the shape of the optional parts the report shows).
RUN_REQUIRED = {
    "steps": INT,
    "warmup_steps": INT,
    "step_time_ms": _STEP_MS,
    "breakdown_ms": _PER_LABEL,
    "breakdown_fraction": {lb: FRAC for lb in LABELS},
    # The verdict's facts (results.Verdict.to_dict); its words (summary) sit beside them where a writer
    # said them, and a document written before the facts were kept has the words only.
    "verdict": {"bound": STR, "summary": Absent(STR), "level": Absent(STR), "step_ms": Absent(NUM)},
    # The words sit beside the facts they are made from; a document that kept only the facts (a StepTimer
    # result written as it is) is said from them.
    "recommendations": [{"text": Absent(STR), "evidence": Absent(ANY), "facts": Absent(ANY)}],
    "backend": STR,
    "device": STR,
}
RUN_OPTIONAL = {
    "warmup_step_time_ms": Opt(MS),
    "kernels": [{"name": STR, "count": NUM, "total_ms": NUM, "mean_us": NUM, "category": Absent(STR)}],
    "memcpy": Some({"by_direction": Map({"bytes": NUM, "ms": NUM, "pageable_bytes": NUM})}),
    "ranks": [{"rank": ANY, "step_time_ms": {"mean": NUM}, "breakdown_ms": _PER_LABEL}],
    "stragglers": [{"sentence": STR}],
    # Processes that trained side by side (Hogwild), merged into the run: each one's own figures.
    "processes": Opt(
        Keys(
            {
                "training": Opt(
                    [{"pid": Opt(INT), "steps": INT, "step_time_ms": {"mean": NUM}, "breakdown_ms": _PER_LABEL}]
                )
            }
        )
    ),
    "waiting": [{"sentence": STR}],
    "compute_split_ms": Opt(Map(NUM)),
    "compute_split_gpu_ms": Opt(Map(NUM)),
    "kernel_categories": Opt(Map({"share": FRAC, "ms": Absent(MS)})),
    # Sampled with --monitor; the GPU's fields only where NVML answered (absent without a GPU).
    "monitor": Opt(
        Keys(
            {
                "samples": INT,
                "cpu_percent_mean": Opt(MS),
                "gpu_util_mean": Opt(FRAC),
                "power_w_mean": Opt(MS),
                "power_w_max": Opt(MS),
                "temp_c_mean": Opt(NUM),
                "temp_c_max": Opt(NUM),
                "per_step": Opt(Map({"mean": NUM, "min": NUM, "max": NUM, "steps": INT})),
            }
        )
    ),
    "workers": Some({"num_workers": NUM, "fetch_ms_mean": NUM, "getitem_ms_mean": NUM, "collate_ms_mean": NUM}),
    "memory": Opt(
        Keys(
            {
                "peak_bytes": Opt(INT),
                "kind": Opt(STR),
                "findings": Opt([{"sentence": Absent(STR)}]),
                "growth_bytes_per_step": Opt(NUM),
                "capacity_bytes": Opt(INT),
            }
        )
    ),
    "cpu_util_percent": Opt(MS),
    "exit": Opt(Keys({"reason": Opt(STR), "exception": Opt(STR)})),
    "notes": [STR],
    "overhead": Opt(
        Keys(
            {
                "ms_per_step": MS,
                "fraction": MS,
                "per_phase_ns": MS,
                "settle_ms_per_step": Opt(MS),
                "own_ms_total": Opt(MS),
                "own_ms_per_step": Opt(MS),
                "pause_ms_total": Opt(MS),
                "pauses": Opt(INT),
                "steady_ms_per_step": Opt(MS),
                "steady_fraction": Opt(MS),
            }
        )
    ),
    "outcome": Opt(Keys({"code": Opt(INT), "reason": Opt(STR), "signal": Opt(STR), "sentence": STR})),
    "startup": Opt(Keys({"time_to_first_step_ms": MS, "first_step_ms": MS, "steady_step_ms": Opt(MS)})),
    "loader_plan": Opt(Keys({"sentence": STR, "reason": STR, "kind": STR})),
    "lines": Opt(
        Keys(
            {
                "steps": INT,
                "samples": INT,
                "interval_ms": MS,
                "labels": [
                    {
                        "label": STR,
                        "ms_per_step": MS,
                        "samples": INT,
                        "lines": [_LINE_COST],
                        "functions": [{k: v for k, v in _LINE_COST.items() if k != "calls"}],
                    }
                ],
                "timeline": Opt(
                    {
                        "first_step": [INT],
                        "last_step": [INT],
                        "steps": [INT],
                        "functions": [[ANY]],
                        "ms_per_step": [[MS]],
                        "other_ms_per_step": [MS],
                    }
                ),
            }
        )
    ),
    "starvation": Opt(
        Keys(
            {
                "steps": INT,
                "starved": INT,
                "share": FRAC,
                "threshold_ms": MS,
                "p50_wait_ms": Opt(MS),
                "p95_wait_ms": Opt(MS),
                "longest_run": INT,
                "longest_run_first_step": Opt(INT),
                "load_ms_per_step": MS,
            }
        )
    ),
}
