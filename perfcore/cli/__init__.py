"""The perfcore command line: each command parses, calls one function, renders. The group lives in
`group`, the checked values in `types`, where results go in `output`, and the options every command
shares in `shared` (which re-exports the other three); the commands, by what they do, in
`measure`, `triage`, `gpu` and `folders`, each imported only when its command is used, so
`perfcore --help` stays instant and never imports torch."""

from __future__ import annotations

import click

from perfcore.cli.group import PerfcoreGroup

__all__ = ["main", "cli"]

# name -> (module, command, the first paragraph of its help, which `perfcore --help` lists without
# importing the module; a test checks each against the command's own help).
COMMANDS = {
    "run": (
        "perfcore.cli.measure",
        "run_cmd",
        "Profile an unmodified script: perfcore run [OPTIONS] -- python train.py ARGS...",
    ),
    "monitor": (
        "perfcore.cli.measure",
        "monitor_cmd",
        "Sample GPU (util, memory, power, temperature, SM clock), CPU and RAM while CMD runs; CSV + PNG.",
    ),
    "health": (
        "perfcore.cli.triage",
        "health_cmd",
        "Stage 1: is the device busy? 100 iterations of next batch -> forward -> loss.",
    ),
    "diagnose": (
        "perfcore.cli.triage",
        "diagnose_cmd",
        "Stage 2: differential experiments (A: synthetic data, B: num_workers, C: decoder) name the bottleneck, "
        "each measured against the baseline's step.",
    ),
    "sweep": (
        "perfcore.cli.triage",
        "sweep_cmd",
        "Stage 3: batch_size x num_workers x pin_memory x prefetch_factor; heatmaps, best, knees.",
    ),
    "demo": (
        "perfcore.cli.triage",
        "demo_cmd",
        "health + run + diagnose on the built-in demo workload (real JPEGs, PIL decode, a small CNN).",
    ),
    "transfer": (
        "perfcore.cli.gpu",
        "transfer_cmd",
        "Pinned vs pageable copy bandwidth (CUDA events), against the link's nominal rate.",
    ),
    "graph": (
        "perfcore.cli.gpu",
        "graph_cmd",
        "Eager vs CUDA-Graph step time, launch overhead, and a same-result check against eager.",
    ),
    "report": ("perfcore.cli.folders", "report_cmd", "Re-render the report and plots of a run folder."),
    "compare": (
        "perfcore.cli.folders",
        "compare_cmd",
        "Per-label and per-kernel-category change from RUN_A to RUN_B, and the speedup.",
    ),
    "merge": (
        "perfcore.cli.folders",
        "merge_cmd",
        "Merge run folders written on different nodes of one job (each ran perfcore run -- torchrun ...).",
    ),
    "env": (
        "perfcore.cli.folders",
        "env_cmd",
        "Build info and a non-destructive check of this machine (GPU, CPU, limits, versions).",
    ),
}


@click.group(cls=PerfcoreGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="perfcore")
def cli() -> None:
    """perfcore: where every millisecond of a PyTorch training step goes.

    Each step's wall time is split into load / transfer / compute / comm / host; perfcore names
    the bottleneck, says what to change, and runs the experiment that proves it.
    """


def main() -> None:
    cli(prog_name="perfcore")
