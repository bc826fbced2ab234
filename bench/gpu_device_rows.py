"""gpu_check's rows on the capture layer's own terms that need a second clock to be decided: event-placed
kernel starts against CUPTI's, perfcore's copy bandwidth against torch.cuda.Event-timed copy_, a graph
capture longer than the drain's period under kernels=True. Each runs in gpu_check's child process."""

from __future__ import annotations

import statistics

import gpu_calibration as cal
import gpu_judge as J
from gpu_rows import Row, within

COPY_REL = 0.10  # perfcore.transfer against copy_ timed by torch.cuda.Event: the same copies, two timers


def check_event_starts() -> list[Row]:
    r = cal.event_starts_vs_cupti()
    b = cal.event_bracket_ns()
    unc = float(r["clock"]["uncertainty_ns"])
    rows = []
    for what, deltas in (("start", r["start_deltas_ns"]), ("end", r["end_deltas_ns"])):
        d = sorted(deltas)
        spread = (
            f"{d[0] / 1e3:+.2f} .. {d[-1] / 1e3:+.2f} us, median {statistics.median(d) / 1e3:+.2f}" if d else "none"
        )
        rows.append(
            Row(
                f"event-placed kernel {what} vs CUPTI's, same kernels",
                f"{len(d)} of {r['kernels']} kernels ({r['pairs']} pairs): CUPTI - event {spread} (bracket "
                f"{b['bracket_ns'] / 1e3:.2f} us, anchor +-{unc / 1e3:.1f} us)",
                "each in [-2 x anchor uncertainty, bracket + 2 x anchor uncertainty] (claim: events placed on the "
                "host clock land where CUPTI puts the same kernel)",
                len(d) == r["kernels"] > 0 and J.starts_ok(d, b["bracket_ns"], unc),
            )
        )
    return rows


def check_copies_vs_events() -> list[Row]:
    r = cal.copies_vs_events()
    return [
        Row(
            f"copy bandwidth {x['direction']} {x['memory']} vs torch.cuda.Event-timed copy_",
            f"perfcore {x['perfcore_gbps']:.1f}, copy_ {x['events_gbps']:.1f} GB/s ({r['size_bytes'] >> 20} MiB)",
            f"within {100 * COPY_REL:g}% (claim: perfcore transfer's GB/s are the copies' own)",
            within(x["perfcore_gbps"], x["events_gbps"], COPY_REL),
        )
        for x in r["rows"]
    ]


def check_long_capture() -> list[Row]:
    r = cal.long_graph_capture()
    return [
        Row(
            "graph capture of > 200 ms under kernels=True, 20 ms drain",
            f"capture {r['capture_ms']:.0f} ms with a {r['drain_period_ms']} ms drain, {r['flushes_during']} flushes "
            f"during it, {r['flushes_held']} held, {r['captures_seen']} capture(s) seen; {r['error'] or 'captured'}; {r['replays']} replays right: {r['right']}; "
            f"{r['kernels_traced']} of {r['kernels_expected']} kernels traced (backend {r['backend']})",
            "captured, replays right, every replayed kernel traced, no flush during the capture and >= 1 held "
            "(claim: the drain sees a capture and never flushes into it)",
            r["error"] is None
            and r["capture_ms"] > 200
            and r["flushes_during"] == 0
            and r["flushes_held"] >= 1
            and r["captures_seen"] >= 1
            and r["right"]
            and r["kernels_traced"] >= r["kernels_expected"],
        )
    ]
