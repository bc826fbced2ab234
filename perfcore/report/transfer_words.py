"""The transfer experiment's link in words: what its nominal rate means, or why NVML could not tell it
(experiments.transfer.nominal_link_gbps's figures and reason code)."""

from __future__ import annotations

from typing import Any

__all__ = ["say_link"]

NOMINAL = "nominal = the most this device and system allow; the current link may be trained down when idle"


def say_link(link: dict[str, Any]) -> dict[str, Any]:
    """transfer.json's link with its words beside its figures, in place, as it has always kept them."""
    if link.get("reason") == "nvml_unavailable":
        link["reason"] = f"NVML could not tell the link ({link.get('error')})"
    elif link.get("gbps") is not None:
        link["note"] = NOMINAL
    return link
