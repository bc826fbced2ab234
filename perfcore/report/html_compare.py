"""compare's page: two runs side by side, their verdicts and what changed per label and per kernel
category, by how much."""

from __future__ import annotations

from pathlib import Path

from perfcore.analysis.attribution import LABELS
from perfcore.analysis.compare import Comparison, Delta
from perfcore.analysis.status import Change
from perfcore.report.charts import COLORS, stackbars
from perfcore.report.html_parts import Body, dur, esc, num, page, tiles
from perfcore.report.words.verdict import change_sentence, level_word, step_words, summary_words

__all__ = ["render_compare_page", "write_compare_report"]


def render_compare_page(doc: Comparison, names: tuple[str, str] = ("A", "B")) -> str:
    """Two runs side by side: their verdicts, what changed per label and per kernel category, by how much."""
    a, b = doc.a, doc.b
    body = Body("compare")
    # The card's colour from the change's status (B against A, beyond both runs' noise), as its words are.
    tone = {Change.SLOWER: "critical", Change.FASTER: "healthy"}.get(doc.change, "")
    body.add(
        "<h1>perfcore compare</h1>",
        f"<div class='sub'>A: {esc(names[0])} · B: {esc(names[1])}</div>",
        f"<div class='verdict {tone}'><div class='bound'>{esc(step_words(doc))}</div>"
        f"<div class='sentence' id='verdict'>{esc(change_sentence(doc))}</div></div>",
    )
    cards = "".join(
        f"<div><h3>{k}: {esc(n)}</h3>{tiles([('step', dur(r.step_ms)), ('device', r.device), ('bound', r.verdict.bound), ('level', level_word(r.verdict.level))])}"
        f"<p>{esc(summary_words(r.verdict))}</p></div>"
        for k, n, r in (("A", names[0], a), ("B", names[1], b))
    )
    body.add(f"<div class='run-grid' style='grid-template-columns:1fr 1fr'>{cards}</div>")
    labels = doc.labels
    if labels:

        def row(name: str, v: Delta, chip: str = "") -> str:
            d = float(v.delta_ms or 0)
            rel = f"{100 * d / v.a_ms:+.0f}%" if v.a_ms else ""
            cls = "delta-up" if d > 0 else "delta-down" if d < 0 else ""
            return (
                f"<tr><td>{chip}{esc(name)}</td><td class='n'>{num(v.a_ms)}</td><td class='n'>{num(v.b_ms)}</td>"
                f"<td class='n {cls}'>{d:+.2f}</td><td class='n {cls}'>{rel}</td></tr>"
            )

        head = (
            "<tr><th></th><th class='n'>A ms</th><th class='n'>B ms</th><th class='n'>change ms</th>"
            "<th class='n'>change</th></tr>"
        )
        body.add(
            "<h2>What changed, per label (ms per step)</h2><table>"
            + head
            + "".join(
                row(lb, labels[lb], f"<i class='pc-chip' style='background:{COLORS[lb]};margin-left:0'></i>")
                for lb in LABELS
                if lb in labels
            )
            + "</table>"
        )
        body.add(
            body.chart(
                stackbars(
                    "ab",
                    [f"A: {names[0]}"[:40], f"B: {names[1]}"[:40]],
                    [{lb: v.a_ms for lb, v in labels.items()}, {lb: v.b_ms for lb, v in labels.items()}],
                    [dur(a.step_ms), dur(b.step_ms)],
                    "A and B, mean step split by label",
                    height=200,
                )
            )
        )
        cats = doc.kernel_categories
        if cats:
            body.add(
                "<h2>Kernel categories (ms per step)</h2><table>"
                + head
                + "".join(row(c, v) for c, v in cats.items())
                + "</table>"
            )
    return page(f"perfcore compare: {doc.step_time_change_pct:+.1f}%", body)


def write_compare_report(path: Path, doc: Comparison, names: tuple[str, str] = ("A", "B")) -> Path:
    """compare's page at `path` (written atomically; a named pipe written into): `perfcore compare A B --html PATH`."""
    from perfcore.report import jsonio

    return jsonio.write_target(Path(path), render_compare_page(doc, names))
