"""Statuses the analysis decides and the renderers put into words: a comparison of two measured
speeds (faster / slower / within noise) and a check of a prediction (confirmed / partly / not confirmed
/ inconclusive). A leaf module: it imports nothing of perfcore, so every layer may use it.

The values are the strings the documents have always carried, so run.json and diagnose.json keep
their keys and values, and an old document's status reads back as the same member."""

from __future__ import annotations

import enum

__all__ = ["Change", "Agreement", "change_of"]


class Change(str, enum.Enum):
    """How a measured speed compares with the one it is measured against, given the runs' noise."""

    FASTER = "faster"
    SLOWER = "slower"
    WITHIN_NOISE = "within noise"


class Agreement(str, enum.Enum):
    """How a measurement compares with the prediction it tests (BOUND: held to a bound, within it)."""

    CONFIRMED = "confirmed"
    PARTLY = "partly"
    NOT_CONFIRMED = "not confirmed"
    INCONCLUSIVE = "inconclusive"
    BOUND = "bound"


def change_of(speedup: float, noise_share: float | None = None) -> Change:
    """A speed ratio (new speed over old: above 1 is faster) against the runs' noise as a share of the
    step: outside 1 +- noise it is faster or slower, inside it within noise. Without a measured noise
    any ratio other than 1 counts (the caller has nothing to widen it by)."""
    noise = max(float(noise_share or 0.0), 0.0)
    x = float(speedup)
    if x > 1.0 + noise:
        return Change.FASTER
    if x < 1.0 / (1.0 + noise):  # the same noise either way: 1.25x faster and 0.8x mirror each other
        return Change.SLOWER
    return Change.WITHIN_NOISE
