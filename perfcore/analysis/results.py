"""What a command decides, typed: the verdict (bound, level, ranked causes with their ms per step, share,
interval and expected gain) as frozen dataclasses holding numbers and statuses, no prose. verdict.decide
makes one; the documents (run.json, diagnose.json, demo.json) are its serialisation, to which the
words are added at the edge (the `summary` and `evidence` keys a reader of an old document expects)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping

__all__ = ["Level", "Gain", "Cause", "Verdict", "Advice", "BOUNDS"]

# The bound each avoidable label names when it is the verdict's.
BOUNDS = {"load": "input-bound", "transfer": "transfer-bound", "comm": "communication-bound", "host": "host-bound"}


class Level(str, enum.Enum):
    """How much a cause costs against the tiers, or the state of a whole verdict."""

    CRITICAL = "critical"
    WARN = "warn"
    BORDERLINE = "borderline"
    MINOR = "minor"
    HEALTHY = "healthy"
    UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True)
class Gain:
    """Removing a cause: the ms it saves per step, the step after, the speedup and its band."""

    saved_ms: float
    step_after_ms: float
    speedup: float | None
    band: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "saved_ms": self.saved_ms,
            "step_after_ms": self.step_after_ms,
            "speedup": self.speedup,
            "band": list(self.band) if self.band else None,
        }


@dataclasses.dataclass(frozen=True)
class Cause:
    """One avoidable label's cost: ms per step, share of the step (and its interval), level, gain."""

    label: str
    bound: str
    ms_per_step: float
    share: float
    level: Level
    gain: Gain
    share_band: tuple[float, float] | None = None
    borderline_tier: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "label": self.label,
            "bound": self.bound,
            "ms_per_step": self.ms_per_step,
            "share": self.share,
            "level": self.level.value,
            "expected_speedup": self.gain.speedup,
            "expected_step_ms": self.gain.step_after_ms,
        }
        if self.share_band is not None:
            d["share_band"] = list(self.share_band)
            d["borderline_tier"] = self.borderline_tier
        return d


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The one decision: the bound (a label, "compute" when healthy, "unknown" before any step), its
    level, every avoidable cause ranked by ms per step, and which of them are named (at or above the
    warn tier, or borderline there)."""

    bound: str
    level: Level
    healthy: bool | None
    primary: str | None
    step_ms: float
    compute_ms: float
    ranked: tuple[Cause, ...]
    uncertain: bool = False

    @property
    def named(self) -> tuple[Cause, ...]:
        return tuple(c for c in self.ranked if c.level is not Level.MINOR)

    @property
    def avoidable_ms(self) -> dict[str, float]:
        return {c.label: c.ms_per_step for c in self.ranked}

    @property
    def avoidable_band_ms(self) -> dict[str, list[float]]:
        return {
            c.label: [c.share_band[0] * self.step_ms, c.share_band[1] * self.step_ms]
            for c in self.ranked
            if c.share_band is not None
        }

    def to_dict(self) -> dict[str, Any]:
        """The numbers of run.json's `verdict` (the words are added beside them by whoever renders)."""
        d: dict[str, Any] = {
            "bound": self.bound,
            "level": self.level.value,
            "healthy": self.healthy,
            "primary": self.primary,
            "step_ms": self.step_ms,
            "compute_ms": self.compute_ms,
            "causes": [c.to_dict() for c in self.named],
            "avoidable_ms": self.avoidable_ms,
        }
        if any(c.share_band is not None for c in self.ranked):
            d["avoidable_band_ms"] = self.avoidable_band_ms
        if self.uncertain:
            d["uncertain"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        """A verdict read back from a document (its named causes; the others are minor and were not kept,
        so their ms per step come from avoidable_ms)."""
        step = float(d.get("step_ms") or 0.0)
        named = {c["label"]: c for c in d.get("causes") or []}
        ranked = []
        for label, ms in (d.get("avoidable_ms") or {}).items():
            c = named.get(label) or {}
            band = c.get("share_band")
            gain = c.get("expected_gain") or {}
            ranked.append(
                Cause(
                    label=label,
                    bound=str(c.get("bound") or BOUNDS.get(label, label)),
                    ms_per_step=float(ms),
                    share=float(c.get("share", ms / step if step else 0.0)),
                    level=Level(c.get("level", "minor")),
                    gain=Gain(
                        float(gain.get("saved_ms", ms)),
                        float(c.get("expected_step_ms", step - ms)),
                        c.get("expected_speedup"),
                        tuple(gain["band"]) if gain.get("band") else None,
                    ),
                    share_band=tuple(band) if band else None,
                    borderline_tier=c.get("borderline_tier"),
                )
            )
        return cls(
            bound=str(d.get("bound")),
            level=Level(d.get("level", "unknown")),
            healthy=d.get("healthy"),
            primary=d.get("primary"),
            step_ms=step,
            compute_ms=float(d.get("compute_ms") or 0.0),
            ranked=tuple(ranked),
            uncertain=bool(d.get("uncertain")),
        )


@dataclasses.dataclass(frozen=True)
class Advice:
    """One piece of advice as facts: its kind (the recommendation's id), the cause or finding it answers,
    where in the user's code (file:line), the settings it changes with their values, the facts its words
    are made from, and its own expected gain (for a loader change, what the free cores allow, which may be less than removing the cause)."""

    kind: str
    cause: str | None
    site: str | None = None
    change: tuple[tuple[str, Any], ...] = ()
    gain: Gain | None = None
    # What the words are made from (numbers, flags, the loader's settings): report.advice_words renders
    # the text and evidence from these; a document without them keeps its stored words.
    facts: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The typed fields of a run.json recommendation (its words, text and evidence, sit beside them)."""
        d: dict[str, Any] = {"id": self.kind, "cause": self.cause, "facts": dict(self.facts)}
        if self.site:
            d["site"] = self.site
        if self.change:
            d["set"] = dict(self.change)
        if self.gain is not None:
            d["gain"] = self.gain.to_dict()
        return d
