"""HTML rendering of a perfcore.run/1 document for Jupyter/Colab (_repr_html_)."""
from __future__ import annotations

import html
from typing import Any

from perfcore.analysis.attribution import LABELS

__all__ = ["render_html"]

COLORS = {"load": "#e4572e", "transfer": "#f3a712", "compute": "#29335c", "comm": "#669bbc", "host": "#a8a8a8"}


def render_html(doc: dict[str, Any]) -> str:
    st = doc["step_time_ms"]
    rows = []
    for lb in LABELS:
        f = doc["breakdown_fraction"][lb]
        rows.append(
            f"<tr><td>{lb}</td><td style='text-align:right'>{doc['breakdown_ms'][lb]:.2f}</td>"
            f"<td style='text-align:right'>{100 * f:.1f}%</td>"
            f"<td><div style='background:{COLORS[lb]};width:{max(0.0, 200 * f):.0f}px;height:10px'></div></td></tr>")
    stacked = "".join(
        f"<div title='{lb} {100 * doc['breakdown_fraction'][lb]:.1f}%' style='display:inline-block;height:14px;"
        f"width:{400 * doc['breakdown_fraction'][lb]:.1f}px;background:{COLORS[lb]}'></div>" for lb in LABELS)
    recs = "".join(f"<li>{html.escape(r['text'])}<br><small>evidence: {html.escape(r['evidence'])}</small></li>"
                   for r in doc["recommendations"])
    return (
        "<div style='font-family:sans-serif'>"
        f"<b>perfcore</b>: {doc['steps']} steps, mean {st['mean']:.2f} ms (p50 {st['p50']:.2f}, p90 {st['p90']:.2f}),"
        f" backend {html.escape(doc['backend'])}, device {html.escape(doc['device'])}"
        f"<div style='margin:6px 0'>{stacked}</div>"
        "<table><tr><th>label</th><th>ms/step</th><th>share</th><th></th></tr>" + "".join(rows) + "</table>"
        f"<p><b>{html.escape(doc['verdict']['summary'])}</b></p>"
        + (f"<ul>{recs}</ul>" if recs else "") + "</div>")
