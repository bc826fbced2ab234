"""The transfer experiment's link in words: what its nominal rate means, or why NVML could not tell it
(experiments.transfer.nominal_link_gbps's figures and reason code)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["link_words"]

NOMINAL = "nominal = the most this device and system allow; the current link may be trained down when idle"


def link_words(link: Mapping[str, Any]) -> str:
    """The link's line: its nominal rate and what that means, or why NVML could not tell it."""
    if link.get("reason") == "nvml_unavailable":
        return f"link: NVML could not tell the link ({link.get('error')})"
    if link.get("gbps") is None:
        return ""
    return f"link: {link['gbps']:.1f} GB/s ({NOMINAL})"
