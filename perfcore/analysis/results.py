"""What a command decides, typed: the verdict (bound, level, ranked causes with their ms per step, share,
interval and expected gain) as frozen dataclasses holding numbers and statuses, no prose. verdict.decide
makes one; the documents (run.json, diagnose.json, demo.json) are its serialisation, to which the
words are added at the edge (the `summary` and `evidence` keys a reader of an old document expects)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping

__all__ = ["Level", "Gain", "Cause", "Startup", "Verdict", "Advice", "BOUNDS"]

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
            "expected_gain": self.gain.to_dict(),
        }
        if self.share_band is not None:
            d["share_band"] = list(self.share_band)
            d["borderline_tier"] = self.borderline_tier
        return d


@dataclasses.dataclass(frozen=True)
class Startup:
    """Start-up's cost against the run: time from launch to the end of the first step, less one steady
    step, as a share of the whole run (that plus the measured steps); dominant at STARTUP_DOMINATES."""

    ms: float
    time_to_first_step_ms: float
    steady_step_ms: float
    share_of_run: float
    dominates: bool
    steps: int = 0
    first_step_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Startup":
        first = d.get("first_step_ms")
        return cls(
            ms=float(d.get("ms") or 0.0),
            time_to_first_step_ms=float(d.get("time_to_first_step_ms") or 0.0),
            steady_step_ms=float(d.get("steady_step_ms") or 0.0),
            share_of_run=float(d.get("share_of_run") or 0.0),
            dominates=bool(d.get("dominates")),
            steps=int(d.get("steps") or 0),
            first_step_ms=float(first) if isinstance(first, (int, float)) else None,
        )


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The one decision: the bound (a label, "compute" when healthy, "unknown" before any step), its
    level, every avoidable cause ranked by ms per step, and which of them are named (at or above the
    warn tier, or borderline there); beside it the facts its words need: the device (what each label's
    time is), the steps (what would settle a borderline cause), how a label was measured where an
    experiment replaced the attribution (a code: "synthetic"), whether the loop is forward-only (whose
    gain is larger than a training step's), start-up's cost, the machine's interference finding and
    the outlier steps set apart. No prose: report.verdict_words says it."""

    bound: str
    level: Level
    healthy: bool | None
    primary: str | None
    step_ms: float
    compute_ms: float
    ranked: tuple[Cause, ...]
    uncertain: bool = False
    on_gpu: bool = False
    steps: int = 0
    measured_by: tuple[tuple[str, str], ...] = ()
    forward_only: bool = False
    startup: Startup | None = None
    interference: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False, hash=False)
    outliers: int = 0
    thresholds: tuple[float, float] = (0.10, 0.20)

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
        """run.json's `verdict`: the numbers and statuses (the words are added beside them at the edge)."""
        d: dict[str, Any] = {
            "bound": self.bound,
            "level": self.level.value,
            "healthy": self.healthy,
            "primary": self.primary,
            "step_ms": self.step_ms,
            "compute_ms": self.compute_ms,
            "causes": [c.to_dict() for c in self.named],
            "avoidable_ms": self.avoidable_ms,
            "thresholds": {"warn": self.thresholds[0], "critical": self.thresholds[1]},
            "on_gpu": self.on_gpu,
            "steps": self.steps,
        }
        if any(c.share_band is not None for c in self.ranked):
            d["avoidable_band_ms"] = self.avoidable_band_ms
        if self.uncertain:
            d["uncertain"] = True
        if self.measured_by:
            d["measured_by"] = dict(self.measured_by)
        if self.forward_only:
            d["forward_only"] = True
        if self.startup is not None:
            d["startup"] = self.startup.to_dict()
        if self.interference is not None:
            d["interference"] = dict(self.interference)
        if self.outliers:
            d["outliers"] = {"count": self.outliers}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        """A verdict read back from a document (its named causes; the others are minor and were not kept,
        so their ms per step come from avoidable_ms)."""
        step = float(d.get("step_ms") or 0.0)
        named = {c["label"]: c for c in d.get("causes") or []}
        bands = d.get("avoidable_band_ms") if isinstance(d.get("avoidable_band_ms"), Mapping) else {}
        ranked = []
        for label, ms in (d.get("avoidable_ms") or {}).items():
            c = named.get(label) or {}
            band = c.get("share_band")
            if band is None and bands.get(label) and step > 0:  # a minor cause keeps its interval here only
                band = [v / step for v in bands[label]]
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
        ranked.sort(key=lambda c: -c.ms_per_step)
        su, out = d.get("startup"), d.get("outliers")
        th = d.get("thresholds") if isinstance(d.get("thresholds"), Mapping) else {}
        by = d.get("measured_by")
        return cls(
            bound=str(d.get("bound")),
            level=Level(d.get("level", "unknown")),
            healthy=d.get("healthy"),
            primary=d.get("primary"),
            step_ms=step,
            compute_ms=float(d.get("compute_ms") or 0.0),
            ranked=tuple(ranked),
            uncertain=bool(d.get("uncertain")),
            on_gpu=bool(d.get("on_gpu")),
            steps=int(d.get("steps") or 0),
            measured_by=tuple((str(k), str(v)) for k, v in by.items()) if isinstance(by, Mapping) else (),
            forward_only=bool(d.get("forward_only")),
            startup=Startup.from_dict(su) if isinstance(su, Mapping) and "share_of_run" in su else None,
            interference=dict(d["interference"]) if isinstance(d.get("interference"), Mapping) else None,
            outliers=int(out.get("count") or 0) if isinstance(out, Mapping) else 0,
            thresholds=(float(th.get("warn", 0.10)), float(th.get("critical", 0.20))),
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
