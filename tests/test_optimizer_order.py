"""Several optimizers are described by how they stepped, as the step clock saw it: stages one after
the other (forward-forward's layer-wise training) are said to step in sequence, never explained as a
GAN's generator and discriminator; optimizers stepping in one iteration keep that explanation."""
from __future__ import annotations

import pytest
from test_torch_reach import SCRIPTS, perfcore_run

from perfcore.analysis.run_report import RunReport
from perfcore.report.words.findings import optimizer_order_sentence, step_source_text
from perfcore.run.child.part_writer import optimizer_order


@pytest.mark.parametrize(
    "n, handovers, others, order",
    [(1, 0, 0, None), (2, 0, 0, None), (2, 1, 0, "sequence"), (3, 2, 0, "sequence"), (2, 0, 40, "interleaved"),
     (3, 1, 40, "both")],
)
def test_the_order_is_what_the_clock_saw(n, handovers, others, order):
    assert optimizer_order(n, handovers, others) == order


def test_each_order_has_its_own_words():
    seq, inter, both = (optimizer_order_sentence(o, 2) for o in ("sequence", "interleaved", "both"))
    assert seq.startswith("2 optimizers stepping in sequence") and "GAN" not in seq
    assert "GAN" in inter and "in sequence" not in inter and "row k holds its step of iteration k-1" in inter
    assert "in sequence" in both and "GAN" in both


def test_layer_wise_training_is_said_to_step_in_sequence_not_as_a_gan(tmp_path):
    # mnist_forward_forward's shape: each layer trained in turn with its own Adam.
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "optimizer_stages.py"), "layerwise", "8")
    assert p.returncode == 0, p.stderr
    assert doc["step_source"] == "optimizer" and doc["seen"]["optimizer_handovers"] == 1
    text = step_source_text(RunReport.from_dict(doc))
    assert "2 optimizers stepping in sequence" in text and "GAN" not in text, text


def test_a_gan_keeps_the_interleaved_explanation(tmp_path):
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "gan.py"))
    assert p.returncode == 0, p.stderr
    assert doc["seen"]["other_optimizer_steps"] > 0 and doc["seen"]["optimizer_handovers"] == 0
    text = step_source_text(RunReport.from_dict(doc))
    assert "stepping in one iteration" in text and "GAN" in text and "in sequence" not in text, text


def test_forward_forward_as_a_user_runs_it(tmp_path):
    # Both layers' steps are rows, said as stages in sequence; the test loader's one batch after training
    # is evaluation, never "train"; in-memory data gets no decoder advice.
    p, doc = perfcore_run(tmp_path, str(SCRIPTS / "forward_forward.py"), "30")
    assert p.returncode == 0, p.stderr
    assert "ITERATIONS 60" in p.stdout
    assert doc["steps"] + doc["warmup_steps"] == 60
    text = step_source_text(RunReport.from_dict(doc))
    assert "2 optimizers stepping in sequence" in text and "GAN" not in text, text
    train, test = doc["loaders"]
    assert (train["role"], train["batches"]) == ("train", 1)
    assert (test["role"], test["batches"]) == ("eval", 1)
    from perfcore.report.words.advice import text_of

    run = RunReport.from_dict(doc)
    texts = [text_of(f, run.loader_plan) for f in run.findings]
    assert texts and not any("decode_jpeg" in t or "PIL" in t for t in texts)


def test_the_page_says_how_the_optimizers_stepped_once_and_its_tile_holds_a_figure():
    """A tile holds a figure: the step source's tile names the optimizers' count, and how they stepped (the
    GAN's paragraph) is said once, under Environment."""
    from pathlib import Path

    from perfcore.analysis.reader import load_run
    from perfcore.report.html.run import render_report

    r, steps = load_run(Path(__file__).parent / "golden" / "runs" / "gan")
    assert step_source_text(r, brief=True) == "optimizer steps (torch.optim); 2 optimizers"
    page = render_report(r, steps)
    assert "<b>optimizer steps (torch.optim); 2 optimizers</b>" in page
    assert page.count("row k holds its step of iteration k-1") == 1
