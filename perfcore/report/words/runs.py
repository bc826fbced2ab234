"""Runs in words, each from its codes and figures: how the script ended (run/parent/outcome's exit code,
reason, signal and OOM killer, and the script's own end as its process saw it); what failed (a script that
failed after measured steps, a sweep configuration with no numbers of its own); why a run saw no step; the
run's notes (finishing's codes, the recording's and the capture's counts); what the sampler could not do; a
CUDA Graph capture that failed (its usual cause and the fix, with the call's own message); the transfer
experiment's link; a sweep's knee; and a run of several processes: a multi-rank run's stragglers, the ranks
that wait for one and those that left no results (analysis.ranks.merge_ranks' facts); for a job across
machines, each node (its ranks, step and what it waits for), the slow node, and how the hosts' clocks were
put on one; and processes that trained side by side (Hogwild, analysis.processes), which are training
processes of one run, never ranks of a job."""

from __future__ import annotations

import dataclasses
import itertools
import signal
from typing import Any, Mapping

from perfcore.analysis.codec import fields_of
from perfcore.analysis.command_results import ScriptExit
from perfcore.analysis.labels import LABELS
from perfcore.analysis.nodes import Alignment, ClockSource, JobNodes, NodeFigures, NodeState
from perfcore.analysis.run_context import Exit, NoStep, Note, Outcome, Straggler, Waiting
from perfcore.analysis.run_parts import Capture
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms, fmt_share
from perfcore.report.words import NO_STEPS, excess_words

__all__ = [
    "outcome_sentence",
    "exit_sentence",
    "exit_words",
    "partial_words",
    "signal_name",
    "script_exit_words",
    "config_failure",
    "capture_notes",
    "notes_of",
    "note_words",
    "details_words",
    "sampling_words",
    "capture_error_words",
    "CAUSES",
    "link_words",
    "crashed_early",
    "no_step_sentence",
    "undecided_words",
    "LOOKS_FOR",
    "FEW_STEPS",
    "knee_text",
    "straggler_sentence",
    "waiting_sentence",
    "missing_sentence",
    "job_problem_words",
    "ranks_phrase",
    "node_sentences",
    "nodes_brief",
    "clock_sentence",
    "trainers_phrase",
    "trainer_lines",
]


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def outcome_sentence(oc: Outcome) -> str:
    """The script's end as `perfcore run` saw it: "finished (exit 0)", "was killed by SIGKILL (exit 137)"."""
    rc, reason = oc.code, oc.reason
    if reason == "steps reached":
        return "stopped after the steps asked for (--steps)"
    if rc == 0:
        return "finished (exit 0)"
    if reason == "out of memory":
        return (
            f"was killed by the kernel's out-of-memory killer (SIGKILL, exit {rc}); "
            "lower the batch size or the DataLoader workers' memory"
        )
    if reason == "killed":
        said = f"was killed by {oc.signal} (exit {rc})"
        if oc.signal == signal.SIGKILL.name:
            said += (
                "; SIGKILL is what the kernel's out-of-memory killer sends: if memory was "
                "short (dmesg shows 'Out of memory'), that is the likely cause"
            )
        return said
    if reason == "interrupted":
        return f"was interrupted (Ctrl-C, exit {rc})"
    if reason == "terminated":
        return f"was terminated ({signal_name(rc - 128) if rc is not None and rc > 128 else 'SIGTERM'}, exit {rc})"
    if reason == "crashed":
        return f"crashed (exit {rc})"
    return f"exited with {rc}"


def exit_sentence(ex: Exit, outcome: Outcome | None) -> str:
    """The script's own end as the child saw it, with the code the parent got: "was interrupted
    (Ctrl-C, exit 130)", "crashed (ValueError: bad shape; exit 1)". An empty message says nothing,
    so a bare KeyboardInterrupt reads as Ctrl-C, never "(KeyboardInterrupt: )"."""
    reason, exc = ex.reason or "exited", (ex.exception or "").strip()
    name, _, msg = exc.partition(":")
    msg = msg.strip()
    code = f"exit {outcome.code}" if outcome is not None and outcome.code else ""
    if reason == "interrupted":
        head, detail = "was interrupted", "Ctrl-C" + (f": {msg}" if name == "KeyboardInterrupt" and msg else "")
    elif reason == "terminated":
        head, detail = "was terminated", "SIGTERM"
    elif reason.startswith("killed"):  # a checkpoint's "killed before writing its results"
        head, detail = f"was {reason}", (exc if msg else name)
    else:
        head, detail = reason, (exc if msg else name)
    # "Ctrl-C, exit 130" as the outcome words it; a message and the code apart: "ValueError: x; exit 1".
    inner = (", " if reason in ("interrupted", "terminated") else "; ").join(x for x in (detail, code) if x)
    return f"{head} ({inner})" if inner else head


def exit_words(r: RunReport) -> str:
    """How the script ended, for "partial results: the script ...": its own end with the exit code where
    perfcore run saw it end, else the reason with the exception's first line."""
    ex = r.exit or Exit()
    if r.outcome is not None:
        return exit_sentence(ex, r.outcome)
    return str(ex.reason) + (f" ({' '.join(str(ex.exception).split())})" if ex.exception else "")


def partial_words(r: RunReport) -> str:
    """ "partial results: the script ..." where it did not finish ("" where it did, or stopped at --steps)."""
    ex = r.exit
    unfinished = ex is not None and ex.reason and ex.reason not in ("finished", "steps reached")
    return f"partial results: the script {exit_words(r)}" if unfinished else ""


# Diagnose's runs, as a failure names them.
_WHERE = {"baseline": " in the baseline", "synthetic": " with synthetic data", "workers": " with"}


def _steps(n: Any) -> str:
    n = int(n or 0)
    return f"{n} measured step{'' if n == 1 else 's'}"


def _how(ended: Any, code: Any) -> str:
    """How the script ended: its run document's words, else its exit code."""
    return str(ended) if ended else f"exited with {code}"


def script_exit_words(ex: ScriptExit) -> str:
    """ "the script crashed (...; exit 1) after 12 measured steps in the baseline: these results are
    partial"."""
    where = _WHERE.get(str(ex.run), "")
    if where == " with":
        where += " " + ", ".join(f"{k}={v}" for k, v in (ex.settings or {}).items())
    oc = ex.outcome
    how = None if oc is None else outcome_sentence(oc) if ex.exit is None else exit_sentence(ex.exit, oc)
    return f"the script {_how(how, ex.code)} after {_steps(ex.steps)}{where}: these results are partial"


@dataclasses.dataclass(frozen=True)
class _Failure:
    """What a configuration's row says of its failure, each fact optional (an older row lacks some)."""

    reason: str | None = None
    ended: str | None = None
    exit_code: int | None = None
    steps: int = 0
    error: str | None = None


def config_failure(row: Mapping[str, Any]) -> str:
    """Why a sweep configuration has no numbers of its own (or only partial ones), from its reason; the
    exception's own message where it had one; an older row's stored text. The row is a document's or a
    table's (NaN for none, numpy scalars): read once into its facts."""
    plain = {k: v.item() if hasattr(v, "item") else v for k, v in dict(row).items()}
    f = _Failure(**fields_of(_Failure, {k: v for k, v in plain.items() if not (isinstance(v, float) and v != v)}))
    if f.reason == "no_measured_step":
        if f.ended:
            return f"the script {f.ended} during warm-up: no measured step"
        if f.exit_code is not None:
            return f"the script ended (exit {f.exit_code}) during warm-up: no measured step"
        return "the run ended in warm-up: no measured step"
    if f.reason == "failed_partway":
        return f"the script {_how(f.ended, f.exit_code)} after {_steps(f.steps)}: these results are partial"
    if f.reason == "out_of_memory" and not f.error:
        return "out of memory"
    return f.error or ""


def capture_notes(cap: Capture) -> list[str]:
    """What the capture's counts mean for the numbers: one line per kind of loss."""
    out = []
    undecodable = cap.count("buffers_undecodable")
    if undecodable:
        out.append(
            f"{undecodable} CUPTI buffer(s) ended at a record CUPTI would not return "
            f"({cap.count('buffers_incomplete')} incomplete: work still running at stop); up to "
            f"{cap.count('bytes_unwalked')} bytes of records after them are lost"
        )
    lost = cap.count("dropped") + cap.count("overflow")
    if lost:
        out.append(
            f"{lost} CUPTI records were dropped (buffers full or drained too slowly): kernel "
            "and copy times are undercounted; see capture in run.json"
        )
    return out


def note_words(n: Note) -> str:
    """One note in words: its own text, or its code's words from its figures."""
    f = n.facts
    if n.code == "evaluation_only":
        return (
            ", ".join(f"pid {p}" for p in f.pids)
            + " stepped no optimizer while other processes trained (evaluation only): not in the steps"
        )
    if n.code == "measured_apart":
        return (
            f"{len(f.processes)} other Python process(es) the script started ("
            + ", ".join(f"pid {p.pid}: {p.steps} steps" for p in f.processes)
            + ") were measured apart: not ranks of this run, not merged into it"
        )
    if n.code == "from_checkpoint":
        return (
            "the process ended without writing its results (killed?): these are its last checkpoint's, "
            f"{f.steps} settled steps"
        )
    if n.code == "finished_afterwards":
        return (
            "finished afterwards by `perfcore report` from the parts its processes wrote: perfcore stopped before "
            f"it saw the script end, so the exit code {f.exit_code} is the one the results imply"
        )
    return n.text or n.code


def notes_of(r: RunReport) -> list[str]:
    """The run's notes, then those its capture facts call for."""
    return [note_words(n) for n in r.notes] + (capture_notes(r.capture) if r.capture is not None else [])


def details_words(r: RunReport) -> dict[str, str]:
    """The step's details in words, each where the run has it, by what it is: host and kernel time by phase
    ("host", "gpu"), the workers' batch ("workers"), peak memory ("memory"), start-up ("startup") and the
    host's CPU ("cpu"). The terminal and the page each arrange them."""
    said = {}
    splits = (("host", "host time in", r.compute_split_ms), ("gpu", "kernel time launched in", r.compute_split_gpu_ms))
    for key, what, split in splits:
        if split:
            said[key] = f"{what} " + ", ".join(f"{k} {fmt_ms(v)}" for k, v in split.items()) + " per step"
    w = r.workers
    if w is not None:
        said["workers"] = (
            f"{w.num_workers} worker(s); a batch takes {fmt_ms(w.fetch_ms_mean)} to make "
            f"(__getitem__ {fmt_ms(w.getitem_ms_mean)}, collate {fmt_ms(w.collate_ms_mean)})"
        )
    mem = r.memory
    if mem is not None and mem.peak_bytes:
        kind = "device memory (allocated)" if mem.kind == "cuda_allocated" else "process RSS"
        said["memory"] = f"peak {kind}: {mem.peak_bytes / 2**20:.0f} MiB"
    su = r.startup
    if su is not None:
        said["startup"] = (
            f"start-up: first step ended {fmt_ms(su.time_to_first_step_ms)} after launch; first step "
            f"{fmt_ms(su.first_step_ms)}" + (f" vs {fmt_ms(su.steady_step_ms)} steady" if su.steady_step_ms else "")
        )
    if r.cpu_util_percent is not None:
        said["cpu"] = f"host CPU utilisation during the run: {r.cpu_util_percent:.0f}%"
    return said


def sampling_words(nvml_error: str) -> str:
    """What the sampler could not do, from NVML's error ("" when it samples the GPU)."""
    return f"no GPU sampling ({nvml_error}); CPU and RAM only" if nvml_error else ""


# What usually causes each reason, and the fix.
CAUSES = {
    "not_capturable": (
        "the optimizer is not capturable: create it with capturable=True (Adam, AdamW, ...) so its step "
        "keeps its state on the GPU"
    ),
    "host_sync": (
        "a CPU sync ran inside the step: .item(), .cpu(), .tolist(), printing a tensor, "
        "torch.cuda.synchronize() or a data-dependent Python branch on a tensor value; move it out of the "
        "step or keep the value on the GPU"
    ),
    "invalidated": (
        "work outside the capture touched the captured stream (another thread, or a library call on the "
        "default stream); capture in one thread and keep other streams idle"
    ),
    "dynamic_shapes": (
        "the step's shapes changed between calls (dynamic shapes): a graph replays fixed shapes, so pad "
        "batches to one size (drop_last=True) or capture one graph per shape"
    ),
    "allocation": (
        "memory was allocated from outside the graph's private pool during capture; warm up more "
        "iterations first, and avoid host-side allocations inside the step"
    ),
    "unsupported_op": "an operation in the step cannot be captured; run the step eagerly to find the failing op",
}


def capture_error_words(f: Mapping[str, Any]) -> str:
    """One line: the optimizer that cannot be captured, or the failing call's message and its usual cause."""
    name = f.get("optimizer")
    if f.get("reason") == "optimizer_not_capturable":
        return (
            f"optimizer {name} cannot be captured as created: pass capturable=True "
            f"({name}(params, ..., capturable=True)) so its step stays on the GPU"
        )
    if f.get("reason") == "optimizer_no_capturable_mode":
        return (
            f"optimizer {name} has no capturable mode; use one that has (SGD, Adam, AdamW with "
            "capturable=True) or capture forward+backward only"
        )
    cause = CAUSES.get(str(f.get("reason")), CAUSES["unsupported_op"])
    return f"capture failed ({f['detail']}): {cause}" if f.get("detail") else f"capture failed: {cause}"


NOMINAL = "nominal = the most this device and system allow; the current link may be trained down when idle"


def link_words(link: Mapping[str, Any]) -> str:
    """The link's line: its nominal rate and what that means, or why NVML could not tell it."""
    if link.get("reason") == "nvml_unavailable":
        return f"link: NVML could not tell the link ({link.get('error')})"
    if link.get("gbps") is None:
        return ""
    return f"link: {link['gbps']:.1f} GB/s ({NOMINAL})"


LOOKS_FOR = (
    "perfcore looks for a step in: torch.optim optimizer.step(), else loss.backward() on the main "
    "thread, else a DataLoader batch fetch, else a top-level nn.Module call; none has happened yet. "
    "Force one with perfcore run --step-on optimizer|backward|batch|forward"
)


_SOURCES = ("optimizer", "backward", "batch", "forward")  # the step sources, in the automatic choice's order


def no_step_sentence(n: NoStep) -> str:
    """Why a run saw no step, from what the hooks saw."""
    if not n.torch_instrumented:
        if n.torch_imported:
            return (
                f"no step seen in {n.wall_s:.1f} s: torch was loaded in a way perfcore could not instrument "
                "(a custom import finder?); time the loop with perfcore.StepTimer instead"
            )
        # --step-on cannot help a script that has no torch loop to find a step in.
        return (
            f"no step seen in {n.wall_s:.1f} s: the script never imported torch, so there was no training loop to time"
        )
    seen = (
        f"{n.forward} top-level forward call(s), {n.backward} backward pass(es), "
        f"{n.batch_all} DataLoader batch(es), "
        f"{'optimizer steps' if n.optimizer_stepped else 'no optimizer step'}"
    )
    if n.forced:
        # The source that would have given steps, in the automatic choice's order.
        found = (n.optimizer_stepped, n.backward > 0, n.batch_all > 1, n.forward > 1)
        works = next((s for s, ok in zip(_SOURCES, found) if ok and s != n.forced), None)
        fix = (
            f"--step-on {works} would find steps here (or leave --step-on out for the automatic choice)"
            if works
            else "nothing else looked like a step either"
        )
        return f"no step seen in {n.wall_s:.1f} s with --step-on {n.forced}: seen {seen}; {fix}"
    return (
        f"no step seen in {n.wall_s:.1f} s: {n.forward} top-level forward call(s), "
        f"{n.backward} backward pass(es), {n.batch_all} DataLoader batch(es), "
        f"no optimizer step. {LOOKS_FOR.split('; none')[0]}. Force one with --step-on "
        "optimizer|backward|batch|forward"
    )


def undecided_words(r: RunReport) -> str:
    """What a run with no verdict says in its place: why it saw no step, else that none was measured."""
    return no_step_sentence(r.no_step) if r.no_step is not None else NO_STEPS


# A script that fails within this many measured steps has shown its first steps, not its steady state:
# its figures are reported as partial and not advised on (the advice would be for a loop that does not
# run yet). The verdict's intervals need about this many steps to settle a 10% tier on a quiet machine.
FEW_STEPS = 50

# How the script ended when it did not finish: these are errors (an interrupt or --steps is the user's).
_ERRORS = ("crashed", "exited", "killed", "out of memory")


def crashed_early(r: RunReport) -> list[str]:
    """The lines a report leads with when the script failed within FEW_STEPS measured steps: the error in
    one line, and that the figures are partial and not advised on. Empty for a run that finished, was
    stopped, or failed later."""
    ex = r.exit
    if ex is None or ex.reason not in _ERRORS or r.steps >= FEW_STEPS:
        return []
    # The exit's words quote the exception's first line (cut at 200 characters where it is written; the
    # traceback is a file in the folder) and the exit code.
    return [
        partial_words(r),
        f"{r.steps} measured step(s) before it ended: too few to advise on; what ran gave the verdict below",
    ]


def knee_text(k: dict[str, Any]) -> str:
    """A sweep's knee (sweep_results.knees) in words."""
    tail = []
    if k.get("flat"):
        tail.append(f"{', '.join(map(str, k['flat']))} add less than {int(float(k.get('within') or 0) * 100)}%")
    if k.get("worse"):
        tail.append(f"{', '.join(map(str, k['worse']))} are slower (cores shared with the loop)")
    return (
        f"batch {k['batch_size']}: throughput stops improving at {k['workers']} worker(s) "
        f"({float(k['samples_per_s']):.0f} samples/s" + (f"; {'; '.join(tail)})" if tail else ")")
    )


# -- several processes: ranks, nodes, trainers ---------------------------------------------------------------------


def _who(parts: Any) -> str:
    return ", ".join(f"host {h} pid {p}" for h, p in parts)


def job_problem_words(p: Mapping[str, Any]) -> str:
    """Why parts cannot be merged as one job (analysis.ranks.job_problem's reason and figures), and what to do."""
    if p["reason"] == "rank_claimed_twice":
        return (
            f"two parts claim rank {p['rank']} ({_who(p['parts'])}): "
            "they come from different runs, not one job; merge the folders of one job's nodes"
        )
    if p["reason"] == "no_rank":
        return (
            f"{p['count']} part(s) have no rank ({_who(p['parts'])}): each is a single-process run, not a rank of "
            "one distributed job; merge only the folders of one job's nodes, and read a run alone with perfcore report"
        )
    return f"the parts disagree on the job's size (world sizes {p['sizes']}): they are not one job"


def straggler_sentence(s: Straggler, on_hosts: bool = False) -> str:
    """A straggler: its own work against the other ranks', as a share of its step, and the label of its
    excess over their median; on_hosts: the job ran on several hosts, and the straggler's is named."""
    label = str(s.excess_label)
    step = float(s.step_ms or 0.0)
    share = (s.work_ms - s.others_work_ms) / step if step > 0 else 0.0
    where = f" on {s.host}" if s.host and on_hosts else ""
    return (
        f"rank {s.rank}{where} holds up the job: its own work is {fmt_ms(s.work_ms)}/step against "
        f"{fmt_ms(s.others_work_ms)} on the other ranks ({fmt_share(share)} of each step); its excess is "
        f"{label}: {excess_words(label)} {fmt_ms(s.excess_ms)}/step more than the median of "
        "the other ranks"
    )


def waiting_sentence(w: Waiting) -> str:
    """A rank that waits in collectives for the stragglers."""
    who = ", ".join(str(r) for r in w.waits_for)
    return f"rank {w.rank} waits {fmt_ms(w.comm_ms)}/step in collectives for rank(s) {who}"


def missing_sentence(r: RunReport) -> str:
    """The ranks of the job that left no results, or "" when none is missing."""
    if not r.missing_ranks:
        return ""
    return (
        f"rank(s) {', '.join(map(str, r.missing_ranks))} of {r.world_size} left no results (crashed or "
        "killed before writing); the report covers the others"
    )


def ranks_phrase(ranks: tuple[int | None, ...]) -> str:
    """Ranks as runs of consecutive numbers: "rank 3", "ranks 0-7", "ranks 0-3, 8, 10-11"."""
    nums = sorted(r for r in ranks if r is not None)
    # Consecutive numbers keep the same difference to their position: one group each.
    runs = [[r for _, r in g] for _, g in itertools.groupby(enumerate(nums), lambda x: x[1] - x[0])]
    said = ", ".join(str(g[0]) if len(g) == 1 else f"{g[0]}-{g[-1]}" for g in runs)
    return f"rank {said}" if len(nums) == 1 else f"ranks {said}" if nums else "no numbered rank"


def node_sentence(n: NodeFigures, job: JobNodes) -> str:
    """One node of the job: the slow node with its cause, a node that waits for it (said as waiting, not as
    slow: its own work is shorter, its collectives longer), or an even one."""
    head = f"{n.host} ({ranks_phrase(n.ranks)})"
    s = job.slow_node
    if n.state is NodeState.SLOW and s is not None:
        return (
            f"{head} is the slow node: its ranks' own work is {fmt_ms(s.work_ms)}/step against "
            f"{fmt_ms(s.others_work_ms)} on the other nodes, the slowest in {fmt_share(s.slowest_share)} of the "
            f"steps; its excess is {s.excess_label}: {excess_words(s.excess_label)} "
            f"{fmt_ms(s.excess_ms)}/step more; rank {s.rank} works longest"
        )
    comm, share = n.comm
    if n.state is NodeState.WAITING:
        return (
            f"{head} waits for {', '.join(n.waits_for)}: {fmt_ms(comm)} of each {fmt_ms(n.step_ms)} step in "
            f"collectives ({fmt_share(share)}); its own work is "
            f"{fmt_ms(n.work_ms)}/step"
        )
    return f"{head}: {fmt_ms(n.step_ms)}/step, its own work {fmt_ms(n.work_ms)}, {fmt_ms(comm)} in collectives"


# Past this many nodes that wait alike, one line says them all.
_NODE_LINES = 3


def _span(values: list[float], fmt: Any) -> str:
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo} to {hi}"


def node_sentences(job: JobNodes) -> list[str]:
    """Each node said, the waiting ones together when there are more than _NODE_LINES of them."""
    waiting = [n for n in job.nodes if n.state is NodeState.WAITING]
    if len(waiting) <= _NODE_LINES:
        return [node_sentence(n, job) for n in job.nodes]
    comm, share = [n.comm[0] for n in waiting], [n.comm[1] for n in waiting]
    together = (
        f"{len(waiting)} nodes ({ranks_phrase(tuple(r for n in waiting for r in n.ranks))}) wait for "
        f"{', '.join(waiting[0].waits_for)}: {_span(comm, fmt_ms)} of each step in collectives "
        f"({_span(share, fmt_share)})"
    )
    return [node_sentence(n, job) for n in job.nodes if n.state is not NodeState.WAITING] + [together]


def nodes_brief(job: JobNodes) -> str:
    """The job's nodes in one line (the brief report's): the slow node, its rank and cause, and who waits
    for it; or that no node holds the others up."""
    s = job.slow_node
    if s is None:
        return (
            f"nodes: {len(job.nodes)}, none holds the others up ("
            + "; ".join(f"{n.host} {ranks_phrase(n.ranks)}" for n in job.nodes)
            + ")"
        )
    slow = next(n for n in job.nodes if n.host == s.host)
    waiting = [n for n in job.nodes if n.state is NodeState.WAITING]
    line = (
        f"nodes: {s.host} ({ranks_phrase(slow.ranks)}) is slow, rank {s.rank} most: "
        f"{excess_words(s.excess_label)} {fmt_ms(s.excess_ms)}/step more than the other nodes"
    )
    if len(waiting) == 1:
        w = waiting[0]
        line += f"; {w.host} ({ranks_phrase(w.ranks)}) waits for it {fmt_ms(w.breakdown_ms.get('comm', 0.0))}/step"
    elif waiting:
        line += f"; {len(waiting)} nodes wait for it, {s.waiting_host} longest ({fmt_ms(s.wait_ms)}/step)"
    return line


def clock_sentence(al: Alignment) -> str:
    """How the hosts' clocks were put on the reference host's, with the uncertainty of each offset and how
    closely one step's collectives end across the hosts after it."""
    said = []
    for h in al.hosts:
        if h.source is ClockSource.REFERENCE:
            continue
        if h.source is ClockSource.NONE:
            said.append(f"{h.host} left on its own clock (no step in common)")
            continue
        by = "collectives" if h.source is ClockSource.COLLECTIVES else "step ends (no collective kept)"
        said.append(
            f"{h.host} {h.offset_ns / 1e9:+.6f} s by its {by} over {h.steps} steps "
            f"(spread {fmt_ms(h.spread_ns / 1e6)}, offset within ±{fmt_ms(h.error_ns / 1e6)})"
        )
    aligned = [h for h in al.hosts if h.source in (ClockSource.COLLECTIVES, ClockSource.STEP_ENDS)]
    if len(aligned) > _NODE_LINES:  # many hosts: their offsets are run.json's, their worst uncertainty said
        said = [
            f"{len(aligned)} hosts by their collectives or step ends (spread up to "
            f"{fmt_ms(max(h.spread_ns for h in aligned) / 1e6)}, offsets within "
            f"±{fmt_ms(max(h.error_ns for h in aligned) / 1e6)})"
        ] + [x for x in said if "own clock" in x]
    line = f"clocks: on {al.reference}'s; " + "; ".join(said)
    if al.residual_ns is not None:
        line += (
            f"; one step's collectives then end within {fmt_ms(al.residual_ns / 1e6)} across the hosts "
            f"(p90 {fmt_ms((al.residual_p90_ns or 0) / 1e6)}, {al.residual_steps} steps)"
        )
    return line


def trainers_phrase(r: RunReport) -> str:
    """ " in 2 training processes" where several trained side by side, else ""."""
    n = len(r.trainers)
    return f" in {n} training processes" if n > 1 else ""


def trainer_lines(r: RunReport) -> list[str]:
    """Each training process's steps, mean step and labels (ms/step), as the terminal's table."""
    rows = r.trainers
    if len(rows) < 2:
        return []
    out = ["", f"  {'process':<12} {'steps':>6} {'step':>9} " + " ".join(f"{lb:>9}" for lb in LABELS)]
    for p in rows:
        out.append(
            f"  {'pid ' + str(p.pid):<12} {p.steps!s:>6} {fmt_ms(p.step_time_ms.mean):>9} "
            + " ".join(f"{fmt_ms(p.breakdown_ms[lb]):>9}" for lb in LABELS)
        )
    return out
