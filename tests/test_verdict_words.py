"""The verdict said once: analysis decides facts and statuses (no prose), report.words.verdict says them,
and every rendering agrees with the numbers beside it, for old documents too."""

from __future__ import annotations

import json
import random
import re

import pytest

from perfcore.analysis.codec import from_doc, to_doc
from perfcore.analysis.results import Interference, Level, Verdict
from perfcore.analysis.run_parts import StartupFacts
from perfcore.analysis.run_report import RunReport
from perfcore.analysis.units import fmt_ms, fmt_share
from perfcore.analysis.verdict import CRITICAL_SHARE, NEAR_TIER, WARN_SHARE, decide
from perfcore.report.words.verdict import card_words, verdict_long, verdict_short
from perfcore.report.words import WIDTH

# Every string a verdict's facts may hold: codes and names, never a sentence.
_CODES = re.compile(r"^[a-z_-]{1,24}$")


def _strings(x, path=""):
    if isinstance(x, str):
        yield path, x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from _strings(v, f"{path}[{i}]")


def _random_verdict(rng: random.Random) -> Verdict:
    step = rng.choice([0.15, 2.0, 25.0, 300.0, 4000.0])
    ms = {
        lb: step * rng.choice([0.0, 0.02, 0.09, 0.1, 0.15, 0.199, 0.2, 0.35])
        for lb in ("load", "transfer", "comm", "host")
    }
    scale = sum(ms.values()) / (0.9 * step)
    ms = {k: v / scale for k, v in ms.items()} if scale > 1 else ms
    band = None
    if rng.random() < 0.6:
        band = {}
        for lb, m in ms.items():
            half = rng.choice([0.0, 0.01, 0.05, 0.12])
            band[lb] = (max(m / step - half, 0.0), m / step + half)
    su = StartupFacts(time_to_first_step_ms=rng.choice([step, 50 * step, 5000.0]), first_step_ms=step * 3,
                      steady_step_ms=step)
    intf = rng.choice([None, Interference(True, ("others",), others_cores=1.4, cores=2, main_cores=0.5)])
    return decide(
        ms,
        step,
        on_gpu=rng.random() < 0.5,
        share_band=band,
        steps=rng.choice([8, 40, 400]),
        startup=su if rng.random() < 0.5 else None,
        interference=intf,
        outliers=rng.choice([0, 0, 3]),
        forward_only=rng.random() < 0.2,
    )


def test_the_verdict_holds_facts_and_codes_not_sentences():
    rng = random.Random(7)
    for _ in range(200):
        v = _random_verdict(rng)
        doc = to_doc(v)
        for path, s in _strings(doc):
            assert _CODES.match(s), (path, s)
        text = json.dumps(doc, allow_nan=False)
        # One serialisation: the typed verdict reads back as itself.
        assert from_doc(Verdict, json.loads(text)) == v


def test_every_rendering_agrees_with_the_number_beside_it():
    """Property: over random measurements and intervals, the words name the verdict's own bound and level,
    quote the primary cause's ms and share as the formatter writes them, and fit their lengths."""
    rng = random.Random(11)
    levels = {"critical": "major", "warn": "moderate", "borderline": "borderline"}
    for _ in range(400):
        v = t = _random_verdict(rng)
        short, long = verdict_short(v), verdict_long(v)
        head, lines, _ = card_words(v)
        assert len(f"verdict: {short}") <= WIDTH and len(lines) <= 2 and all(len(x) <= WIDTH for x in [head, *lines])
        if t.level is Level.HEALTHY:
            assert t.bound == "compute" and "healthy" in short and "healthy" in long
            assert all(c.level is Level.MINOR for c in t.ranked)
            continue
        top = next(c for c in t.named if c.label == t.primary)
        assert fmt_share(top.share) in short and fmt_share(top.share) in long
        assert fmt_ms(top.ms_per_step) in long
        # The word beside the share is the tier the share's interval surely reaches; near a tier's line
        # (its interval across it, or its estimate within NEAR_TIER of it) the tier below, in every run.
        low = top.share_band[0] if top.share_band else top.share
        near = top.share_band is not None and any(
            top.share_band[0] < tier <= top.share_band[1] or abs(top.share - tier) <= NEAR_TIER * tier
            for tier in (WARN_SHARE, CRITICAL_SHARE)
        )
        if top.level is Level.BORDERLINE:
            assert near and top.borderline_tier == WARN_SHARE
            assert short.startswith("compute-bound;") and "near the 10% line" in short, short
            assert head.startswith("compute-bound; ") and "near the 10% line" in long
            assert any("near the 10% line" in x for x in lines) and "input-bound" not in short
            continue
        assert top.bound in short and top.bound in long.lower() and top.bound in head
        assert f"({levels[top.level.value]})" in short and f"({levels[top.level.value]})" in head
        assert fmt_ms(top.ms_per_step) in short
        if top.level is Level.CRITICAL:
            assert low >= CRITICAL_SHARE and not near
        else:
            assert top.level is Level.WARN and (WARN_SHARE <= low < CRITICAL_SHARE or near)
            if top.borderline_tier == CRITICAL_SHARE:
                assert "near the 20% line" in short or len(short) > WIDTH - 34, short
        if t.uncertain:
            assert "[uncertain: busy]" in short or len(short) > WIDTH - 29
            assert long.startswith("other processes used 1.4 of 2 cores")
        if t.startup is not None and t.startup.dominates:
            assert "Start-up dominates" in long and "Start-up" not in short


def test_an_old_document_is_said_from_its_figures_never_its_stored_words():
    from perfcore.analysis.migrate import migrate_verdict

    # Written before the facts were kept: no on_gpu, the words beside its figures.
    old = {
        "bound": "load",
        "level": "critical",
        "healthy": False,
        "primary": "load",
        "step_ms": 25.6,
        "causes": [
            {
                "label": "load",
                "bound": "input-bound",
                "ms_per_step": 12.3,
                "share": 0.48,
                "level": "critical",
                "what": "waiting for data",
                "evidence": "as it was written",
            }
        ],
        "avoidable_ms": {"load": 12.3, "transfer": 0.0, "comm": 0.0, "host": 0.0},
        "summary": "INTERFERENCE. Input-bound: as it was written",
        "plain_summary": "input-bound: as it was written",
    }
    v = from_doc(Verdict, migrate_verdict(old))
    assert "as it was written" not in verdict_long(v, lead=False) + verdict_long(v) + verdict_short(v)
    assert verdict_short(v).startswith("input-bound (major): waiting for data, 12.3 ms")
    assert card_words(v)[0] == "input-bound (major): waiting for data"


def _doc(steps: int, reason: str, exception: str = "") -> dict:
    bd = {"load": 2.0, "transfer": 0.0, "compute": 8.0, "comm": 0.0, "host": 0.5}
    doc = {
        "steps": steps,
        "warmup_steps": 5,
        "device": "cpu",
        "backend": "host",
        "step_time_ms": {"mean": 10.5, "p50": 10.0, "p90": 12.0},
        "breakdown_ms": bd,
        "breakdown_fraction": {k: v / 10.5 for k, v in bd.items()},
        "exit": {"reason": reason, "exception": exception},
        "outcome": {"code": 1 if reason == "crashed" else 0, "reason": reason},
        "loaders": [{"site": "train.py:12", "num_workers": 0, "training": True}],
    }
    from perfcore.analysis.advice import advise_run

    return RunReport.of(doc, advise_run(doc, zero_code=True))


def test_a_script_that_crashed_early_leads_with_the_error_and_gives_no_advice():
    from perfcore.report.terminal import render_brief
    from perfcore.report.words.runs import FEW_STEPS

    exc = "ValueError: " + "bad batch " * 4
    lines = render_brief(_doc(8, "crashed", exc), "runs/r1").splitlines()
    # The error first, quoting the exception's one line (the exit record cuts it at 200 characters).
    assert lines[0] == f"partial results: the script crashed ({exc.strip()}; exit 1)"
    assert lines[1].startswith("8 measured step(s)") and not any(ln.startswith("try:") for ln in lines)
    assert any(ln.startswith("verdict: input-bound") for ln in lines)  # the figures are still shown
    assert all(len(ln) <= WIDTH for ln in lines[:-1])
    from perfcore.report.html.run import run_card

    assert "<div class='sentence'>partial results: the script crashed (exit 1)" in run_card(_doc(8, "crashed"))
    # A crash after many steps, or a finished run: advised as usual.
    for doc in (_doc(FEW_STEPS, "crashed", exc), _doc(8, "finished")):
        lines = render_brief(doc, "runs/r1").splitlines()
        assert lines[0].startswith("perfcore:") and any(ln.startswith("try:") for ln in lines)


def test_the_card_words_lead_with_a_crash_and_say_an_undecided_verdict_by_its_sentence():
    from perfcore.analysis.results import UNDECIDED

    band = {"load": (0.05, 0.25), "transfer": (0, 0), "comm": (0, 0), "host": (0, 0.02)}
    intf = Interference(True, ("others",), others_cores=1.7, cores=2, main_cores=0.3)
    v = decide({"load": 15.0, "host": 1.0}, 100.0, share_band=band, steps=20, interference=intf)
    head, short, _ = card_words(v)
    assert len(short) == 2 and card_words(v) == (head, short, verdict_long(v))
    # A run that failed early: its end first, then the card's first short line, two at most.
    said = card_words(v, crash=["partial results: the script crashed (exit 1)", "second"])
    assert said[1] == ["partial results: the script crashed (exit 1)", *short][:2]
    # Not decided: the sentence given is the headline, else `none`, and nothing else is said.
    assert card_words(UNDECIDED, "health: 40% busy") == ("health: 40% busy", [], "")
    assert card_words(UNDECIDED, none="the run ended in warm-up") == ("the run ended in warm-up", [], "")
    assert card_words(UNDECIDED) == ("no verdict", [], "")


def test_the_html_card_is_a_headline_two_short_lines_and_the_why_panel():
    import html as h

    from perfcore.report.html.parts import verdict_card

    band = {"load": (0.05, 0.25), "transfer": (0, 0), "comm": (0, 0), "host": (0, 0.02)}
    intf = Interference(True, ("others",), others_cores=1.7, cores=2, main_cores=0.3)
    v = decide({"load": 15.0, "host": 1.0}, 100.0, share_band=band, steps=20, interference=intf)
    card = h.unescape(verdict_card(v, card_words(v)))
    head = re.search(r"<div class='bound' id='verdict'>(.*?)</div>", card).group(1)
    short = re.search(r"<div class='sentence'>(.*?)</div>", card).group(1).split("<br>")
    why = re.search(r"<details class='why'><summary>why</summary><p>(.*?)</p>", card).group(1)
    assert head == "compute-bound; waiting for data 15% of a 100 ms step" and len(short) == 2
    assert short[0].startswith("uncertain") and short[1].startswith("near the 10% line") and "5.0-25%" in short[1]
    assert why == verdict_long(v) and card.count("costs 15.0 ms") == 1  # the long words once, in the panel


@pytest.mark.parametrize("steps", [0, 3])
def test_an_undecided_or_warm_up_only_verdict_says_so(steps):
    from perfcore.analysis.results import UNDECIDED

    v = UNDECIDED
    assert verdict_long(v, lead=False) == "no steps measured" and verdict_short(v) == "no steps measured"


def test_others_load_is_said_once_when_threads_found_their_cores_taken():
    from test_advice_fits import HEALTHY, run_doc

    from perfcore.analysis.advice import advise_run

    busy = {"material": True, "reasons": ["others"], "others_cores": 1.3, "cores": 2}
    doc = run_doc(HEALTHY, threads={"torch": 2, "omp_env": None, "cpus": 2}, interference=busy)
    v = advise_run(doc, zero_code=True, evidence={"cpu_count": 2}).verdict
    assert v.threads_busy is not None, v
    said = verdict_long(v)
    assert said.count("other processes used") == 1, said
