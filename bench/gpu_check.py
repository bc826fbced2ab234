"""One prepared run for a lent GPU machine: accuracy and cost of perfcore's GPU parts, as a table.

    bash bench/gpu_check.sh            # builds perfcore there, then runs this
    python bench/gpu_check.py [--json PATH]

Without a GPU it says so in one line and exits 3. Targets are from issue #2 and later issues;
every row prints the measured value next to its target.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", dest="json_path", default=None)
    args = ap.parse_args()

    import perfcore
    from perfcore import calibration as cal

    caps = perfcore.capabilities()
    if not caps["features"]["cuda_events"]:
        why = caps["reasons"].get("cuda_events") or caps["reasons"].get("native", "unknown")
        print(f"gpu_check: no GPU to check here: {why}", file=sys.stderr)
        return 3

    import torch

    dev = torch.cuda.get_device_name(0)
    t_start = time.time()
    rows: list[tuple[str, str, str, bool]] = []

    def row(name: str, value: str, target: str, ok: bool) -> None:
        rows.append((name, value, target, ok))
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {value} (target {target})", flush=True)

    print(f"gpu_check on {dev}, torch {torch.__version__}, CUPTI {caps['cupti_version']}", flush=True)
    for r in cal.event_timer_error():
        us = r["requested_ns"] / 1e3
        row(f"event timer, {us:g} us kernel", f"{r['median_ns'] / 1e3:.2f} us, error {r['rel_error'] * 100:.2f}%",
            "<= 2%", r["rel_error"] <= 0.02)
    k = cal.cupti_kernel_error()
    for r in k["durations"]:
        us = r["requested_ns"] / 1e3
        row(f"CUPTI kernel duration, {us:g} us kernel", f"{r['median_ns'] / 1e3:.2f} us, error {r['rel_error'] * 100:.2f}% "
            f"({r['kernels']} kernels)", "<= 1%", r["rel_error"] <= 0.01)
    row("CUPTI records on the perfcore clock", f"{k['on_clock']}/{k['launches']} kernels inside their host window",
        "all", k["on_clock"] == k["launches"] and k["launches"] > 0)
    row("CUPTI dropped records", str(k["stats"].get("dropped_records")), "0", k["stats"].get("dropped_records") == 0)
    m = cal.memcpy_kinds()
    row("memcpy pageable/pinned flags", ", ".join(m["src_kinds"]) or "no copies seen", "pageable, pinned", m["correct"])
    bw = cal.copy_bandwidth()
    for key, gbps in bw.items():
        row(f"copy {key.replace('_gbps', '')}", f"{gbps:.1f} GB/s", "measured", gbps > 0)
    lo = cal.launch_overhead_us()
    row("launch overhead", f"{lo['host_us_per_launch']:.2f} us host/launch, {lo['gpu_us_per_kernel']:.2f} us GPU/kernel",
        "measured", lo["host_us_per_launch"] > 0)

    print()
    print(f"| check | measured | target | result |")
    print(f"|---|---|---|---|")
    for name, value, target, ok in rows:
        print(f"| {name} | {value} | {target} | {'PASS' if ok else 'FAIL'} |")
    print(f"\n{dev}; {platform.node()}; {time.strftime('%Y-%m-%d')}; {time.time() - t_start:.0f} s")
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump({"device": dev, "capabilities": caps,
                       "rows": [dict(zip(("check", "measured", "target", "pass"), r)) for r in rows]}, fh, indent=2)
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a check that crashes still ends in one line, never a bare traceback
        from perfcore.errors import DeviceUnavailable

        print(f"gpu_check: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(3 if isinstance(e, DeviceUnavailable) else 1)
