"""The device experiments: copy bandwidth (transfer) and eager vs CUDA-Graph steps (graph)."""

from __future__ import annotations

import sys

import click

from perfcore.cli.shared import COUNT, EXIT_FAILURE, Results, results, steps_option, with_targets

__all__ = ["transfer_cmd", "graph_cmd"]


@click.command("transfer")
@click.option("--sizes", default="4K..1G", show_default=True, help="Range a..b (x4 steps) or a list: 4K,1M,256M.")
@click.option("--direction", default="h2d,d2h", show_default=True)
@click.option("--repeats", type=COUNT, default=10, show_default=True)
@click.option("--batch-shape", help="e.g. 128,3,224,224: ms per batch pinned vs pageable, and overlap.")
@click.option("--dtype", default="float32", show_default=True)
@results("transfer")
def transfer_cmd(res: Results, sizes, direction, repeats, batch_shape, dtype) -> None:
    """Pinned vs pageable copy bandwidth (CUDA events), against the link's nominal rate.

    No target: it copies buffers of its own (needs a CUDA GPU). Writes transfer.json, transfer.csv and
    transfer.png into its folder (--out).
    """
    from perfcore.experiments.transfer import parse_shape, parse_sizes

    size_list = parse_sizes(sizes)
    dirs = [d.strip() for d in direction.split(",") if d.strip()]
    bad = [d for d in dirs if d not in ("h2d", "d2h")]
    if bad or not dirs:
        raise click.BadParameter(f"directions are h2d and d2h, got {direction!r}", param_hint="--direction")
    shape = parse_shape(batch_shape) if batch_shape else None
    from perfcore._native import require_cuda

    require_cuda("perfcore transfer")  # exits 3 with the reason on a machine without a GPU
    from perfcore import jsonio
    from perfcore.report.plots import plot_transfer
    from perfcore.experiments.transfer import batch_cost, measure, nominal_link_gbps, summarize_curve

    out_dir = res.folder
    curve = measure(size_list, dirs, repeats)
    from perfcore.report.words.runs import link_words

    link = nominal_link_gbps()  # its figures and reason code: the words are said below, not stored
    gbps = link["gbps"]  # None where the link's rate is not known
    doc = {
        "schema": "perfcore.experiments.transfer/2",
        "curve": curve.to_dict("records"),
        "link": link,
        "summary": summarize_curve(curve, gbps),
    }
    if shape:
        doc["batch"] = batch_cost(shape, dtype)
    jsonio.write_csv(out_dir / "transfer.csv", curve)
    plot_transfer(curve, out_dir / "transfer.png", gbps)
    jsonio.write(out_dir / "transfer.json", doc)
    files = ["transfer.json", "transfer.csv", "transfer.png"]
    for k, v in doc["summary"].items():
        res.echo(f"  {k}: {v:.2f}")
    said = link_words(link)
    if said:
        res.echo(f"  {said}")
    if shape:
        b = doc["batch"]
        res.echo(
            f"  batch {tuple(shape)} {dtype}: pinned {b['pinned_ms']:.2f} ms, pageable {b['pageable_ms']:.2f} ms; "
            f"non_blocking overlaps a kernel: pinned {b['overlap_pinned']}, pageable {b['overlap_pageable']}"
        )
    res.done(doc, files)


@click.command("graph")
@click.argument("workload")
@steps_option(50)
@results("graph")
@with_targets(None, "WORKLOAD")
def graph_cmd(res: Results, workload, steps) -> None:
    """Eager vs CUDA-Graph step time, launch overhead, and a same-result check against eager.

    Needs a CUDA GPU. Not a script: the step is captured as a graph in perfcore's own process. Writes
    graph.json into its folder (--out).
    """
    from perfcore._native import require_cuda

    require_cuda("perfcore graph")
    from perfcore import jsonio
    from perfcore.experiments.graph_experiment import graph_experiment
    from perfcore.workloads import load_workload

    doc = graph_experiment(load_workload(workload), steps=steps)
    jsonio.write(res.folder / "graph.json", doc)
    lo = doc["launch_overhead"]
    res.echo(
        f"launch overhead: eager {lo['eager_host_us_per_launch']:.2f} us/launch (host), "
        f"graph {lo['graph_us_per_kernel']:.2f} us/kernel"
    )
    if doc["captured"]:
        c = doc["check"]
        res.echo(
            f"step: eager {doc['eager_step_ms']:.3f} ms, graphed {doc['graph_step_ms']:.3f} ms "
            f"({doc['speedup']:.2f}x); same results as eager: {c['match']} "
            f"(loss rel err {c['max_loss_rel_error']:.1e}, params {c['max_param_rel_error']:.1e})"
        )
    else:
        res.echo(f"not captured: {doc['error']}")  # the capture's error, and no graphed step
    res.done(doc, ["graph.json"])
    if not doc["captured"]:
        sys.exit(EXIT_FAILURE)
