"""The advice into words: each finding's text and evidence, made from the facts analysis.advice decides
(kinds, numbers, the loader's settings; the loader plan's words are report.plan_words)."""

from __future__ import annotations

from typing import Any, Mapping

from perfcore.analysis.checks import Against, Experiment
from perfcore.analysis.findings import Finding, FindingKind
from perfcore.analysis.results import Startup
from perfcore.analysis.run_context import LoaderPlan
from perfcore.analysis.run_parts import Evaluation
from perfcore.analysis.status import Change
from perfcore.analysis.units import fmt_ms, fmt_share, fmt_x
from perfcore.report.finding_words import evaluation_sentence, memory_words
from perfcore.report.label_words import evidence_words, gain_words, startup_sentence
from perfcore.report.plan_words import plan_words, where_words

__all__ = ["advice_words", "text_of", "evidence_of", "test_of", "TEST_WORDS", "ways_short"]

# What makes one rank slower than the others, by the label of its excess.
_SLOW_WHY = {
    "compute": "it computes longer per step: uneven shards or sequence lengths, a slower or shared device, or "
    "other processes on its cores",
    "load": "its DataLoader keeps it waiting: more workers or a faster source on its node",
    "transfer": "its copies take longer: pinned memory and non_blocking copies on its node",
    "host": "it spends longer outside the model: logging, metrics or checkpointing done on that rank only",
}
# Each way to faster compute: (short, for the "try" line; long, for the advice's text).
_WAYS = {
    "bf16": ("bf16 autocast", "bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16) around forward and loss)"),
    "bf16_if_supported": (
        "bf16 autocast if the GPU has bf16",
        "bf16 autocast where the GPU has bf16 (Ampere or newer)",
    ),
    "compile": ("torch.compile", "torch.compile(model)"),
    "gpu": ("a GPU", "a GPU, where this compute would run many times faster"),
}
_STARTUP = (
    "Measure a longer run (--steps) before judging the steady state; to cut the start itself, build the "
    "dataset index once (cache it), keep workers (persistent_workers=True), and compile or warm up once."
)


def _expected(f: Mapping[str, Any], rid: str) -> str:
    """What the advice would gain, after its text."""
    g = f.get("cause_gain")
    said = gain_words(g["speedup"], g.get("band")) if g else ""
    if not said:
        return ""
    if rid == "cheaper_batches" and f.get("plan"):
        return (
            f" Expected: a batch that costs nothing would make steps {said}; more workers "
            f"about {fmt_x(f.get('workers_speedup'))}."
        )
    a = f.get("achievable_gain")
    if a:
        a_said = gain_words(a["speedup"], a.get("band"))
        return (
            f" Expected: steps {a_said}, {fmt_ms(a['step_after_ms'])} a step: what the free cores "
            f"allow of the {fmt_x(g['speedup'])} that removing the wait would give."
            if a_said
            else ""
        )
    return f" Expected: steps {said}, {fmt_ms(g['step_after_ms'])} a step."


def _pageable(f: Mapping[str, Any]) -> str:
    ms = f.get("pageable_ms")
    return f"{f['pageable_bytes'] / 2**20:.1f} MiB per step copied host-to-device from pageable memory" + (
        f", {fmt_ms(ms)} per step" if ms else ""
    )


def _way_long(w: Mapping[str, Any]) -> str:
    if w["way"] == "optimizer":
        return (
            f"{w['snippet']} (the optimizer is {fmt_share(float(w.get('share') or 0.0))} of the step; "
            f"its {w['keyword']} form runs it in fewer kernels)"
        )
    return _WAYS[w["way"]][1]


def ways_short(rec: Finding) -> list[str]:
    """The faster-compute advice's ways in a few words each, for the "try" line."""
    ways = rec.figures.get("ways") if rec.kind is FindingKind.FASTER_COMPUTE else None
    return [str(w["snippet"]) if w["way"] == "optimizer" else _WAYS[w["way"]][0] for w in ways or []]


def advice_words(  # noqa: C901, PLR0911, PLR0912
    rec: Finding, plan: LoaderPlan | None = None
) -> tuple[str, str]:
    """One finding's (text, evidence) from its figures; plan: the run's loader plan, which a load cause's
    advice is made of."""
    f, rid = rec.figures, rec.kind.value
    at = where_words(f.get("loader") or {})
    gain = _expected(f, rid)
    because = evidence_words(f["cause_facts"]) if isinstance(f.get("cause_facts"), Mapping) else ""
    if rid == "balance_ranks":
        return (
            f"Even out rank {f['slow_rank']}'s work: {_SLOW_WHY.get(f['excess_label'], f['excess_label'])}. "
            f"The other ranks would stop waiting about {fmt_ms(f['wait_ms'])} per step.",
            f"rank {f['waiting_rank']} waits {fmt_ms(f['wait_ms'])} of a {fmt_ms(f['step_ms'])} step "
            f"({fmt_share(f['wait_share'])}) for rank {f['slow_rank']}, whose {f['excess_label']} is "
            f"{fmt_ms(f['excess_ms'])} per step above the others'",
        )
    if rid == "workers_measured":  # diagnose's experiment B measured this setting faster, beyond its noise
        return (
            f"Set num_workers={f['num_workers']} in the DataLoader: experiment {f['experiment']} measured the "
            f"step {fmt_x(f['speedup'])} faster.",
            f"diagnose's experiment {f['experiment']} against its baseline, beyond both runs' noise and within "
            "what removing all loading can give",
        )
    if rid == "pageable_despite_pin":
        return (
            f"In {at}: pin_memory=True is set, yet copies come from pageable memory: a tensor made in the "
            "loop rather than taken from the batch, or a custom batch type without a pin_memory() method. "
            "Pin that tensor (.pin_memory()) or make it on the device, and copy with "
            ".to(device, non_blocking=True).",
            _pageable(f),
        )
    if rid == "pin_memory":
        saving = (
            f" Expected saving: up to {fmt_ms(f['pageable_ms'])} per step, the time those copies take now, once "
            "they overlap compute."
            if f.get("pageable_ms")
            else ""
        )
        return (
            f"In {at}: set pin_memory=True, and copy with .to(device, non_blocking=True): "
            "pageable copies are staged through a bounce buffer and block the host." + saving,
            _pageable(f),
        )
    if f.get("plan") and plan is not None:
        text = plan_words(plan)[1] + gain
    elif f.get("plan"):  # the plan is not at hand: only what it would gain
        text = gain
    elif rid == "more_workers":
        ways = ["more workers (num_workers)"] + (["persistent_workers=True"] if f.get("persistent_workers") else [])
        text = (
            f"Feed the loop faster in {at}: " + ", ".join(ways) + ", "
            "cheaper work per item (transforms done once, data cached as tensors)." + gain
        )
    elif rid == "overlap_copies":
        text = (
            "Overlap copies with compute: "
            + ("" if f.get("pinned") else f"pin_memory=True in {at}, ")
            + ".to(device, non_blocking=True), and copy the next batch while this one computes."
            + gain
        )
    elif rid == "overlap_comm":
        text = (
            "Overlap communication with backward (DDP bucket_cap_mb, gradient accumulation "
            "with no_sync), or send less (bf16 gradients)." + gain
        )
    elif rid == "launch_overhead":
        text = (
            "The GPU idles between kernels: remove .item()/.cpu()/print of tensors from the loop, capture "
            + (
                "the step with CUDA Graphs (the model is compiled already: mode='reduce-overhead' does that)"
                if f.get("compiled")
                else "the step with torch.compile(mode='reduce-overhead') or CUDA Graphs"
            )
            + ", and raise the batch size."
            + gain
        )
    elif rid == "host_gaps":
        text = (
            "Look at what your loop does between optimizer.step() and the next batch, and "
            "between forward and backward: loss and metric code outside the model, logging, .item() calls, "
            "checkpointing. On a CPU this time also holds tensor math outside modules (a functional loss, "
            "zero_grad, a manual p.data.add_ update): real compute, which a module (nn.MSELoss rather than "
            f"F.mse_loss), torch.optim{'' if f.get('compiled') else ', or torch.compile'} makes cheaper or at "
            "least visible. perfcore report --explain names the lines of your loop that hold this time." + gain
        )
    elif rid == "untimed_host_work":
        text = (
            "Time the rest of the step with timer.phase('name') to see what it is "
            "(logging, metrics, checkpointing, Python overhead)." + gain
        )
    elif rid == "set_num_threads":
        others = float(f.get("others_cores") or 0.0)
        return (
            f"Call torch.set_num_threads({f['fits']}) at the top of the script (or set OMP_NUM_THREADS="
            f"{f['fits']}): OpenMP threads spin waiting for each other when cores are oversubscribed, "
            "which can make a step many times slower.",
            f"{f['threads']} {'torch' if f.get('source') == 'torch' else 'OpenMP'} threads on the "
            f"{f['cpus']} CPU(s) this process may use"
            + (f" (other processes used {others:.1f})" if others >= 0.05 else ""),
        )
    elif rid == "faster_compute":
        return (
            f"The step is {'GPU ' if f.get('on_gpu') else ''}compute; what would make it faster: "
            + "; ".join(_way_long(w) for w in f["ways"])
            + ".",
            f"compute is {fmt_ms(f['compute_ms'])} of a {fmt_ms(f['step_ms'])} step",
        )
    elif rid == "startup":
        return _STARTUP, startup_sentence(Startup(**f["startup"]))
    elif rid == "evaluation":
        return (
            f"Evaluation takes {fmt_share(f['share_of_wall'])} of the wall time: evaluate less often "
            "or on fewer batches, under torch.inference_mode(), with a larger batch size than training",
            evaluation_sentence(Evaluation(**f["evaluation"])),
        )
    elif rec.kind.memory:  # a memory finding: its advice, and the finding as evidence
        sentence, advice = memory_words(f)
        return advice, sentence
    else:
        text = ""
    c = rec.measured(Against.ADVICE)
    if c is not None and c.experiment is Experiment.DECODER and not c.below_1x:
        text += f" Measured: {c.name} alone gave {fmt_x(c.measured_speedup)}."  # diagnose's experiment C
    elif c is not None and c.experiment is Experiment.DECODER:
        # Said from C's change beside its figure: below 1x inside the noise is "no faster", not "slower".
        how = "made steps slower here" if c.change is Change.SLOWER else "made steps no faster"
        text += (
            f" Not the decoder: {c.name} {how} ({fmt_x(c.measured_speedup)}); cache or pre-resize the images instead."
        )
    return text, because


# The perfcore command that tests a piece of advice, by the code analysis/ gives it.
TEST_WORDS = {
    "diagnose": "perfcore diagnose (synthetic data measures the step without loading)",
    "graph": "perfcore graph",
}


def test_of(rec: Finding) -> str:
    """The command that tests the advice, from its code."""
    return TEST_WORDS.get(rec.test or "", "")


def text_of(rec: Finding, plan: LoaderPlan | None = None) -> str:
    """The finding's advice in words."""
    return advice_words(rec, plan)[0]


def evidence_of(rec: Finding, plan: LoaderPlan | None = None) -> str:
    """The finding's evidence in words."""
    return advice_words(rec, plan)[1]
