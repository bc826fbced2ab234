"""The one place that knows older documents: perfcore.run/1 (and a part written by an older perfcore), and
the health, diagnose, sweep and demo documents of /1, turned into the shape this version reads. Words an
older document stored beside its facts are dropped, never read: where only the words were kept (a document
written before its facts were), the reports say less. Pure functions on parsed JSON; the reader calls them
before a document is parsed into its typed result."""

from __future__ import annotations

import re
from typing import Any, Mapping

from perfcore.analysis.codec import to_doc
from perfcore.analysis.findings import Site
from perfcore.analysis.interference import reasons_of
from perfcore.analysis.results import BOUNDS

__all__ = ["migrate", "migrate_run", "migrate_verdict", "migrate_check", "CURRENT"]

# The version of each document this perfcore writes.
CURRENT = {
    "perfcore.run": 2,
    "perfcore.health": 2,
    "perfcore.diagnose": 2,
    "perfcore.sweep": 2,
    "perfcore.experiments.demo": 2,
}
# Keys that only ever held words.
_WORDS = ("sentence", "text", "evidence", "summary", "plain_summary", "what", "detail", "meaning", "test")


def _d(v: Any) -> dict[str, Any]:
    return dict(v) if isinstance(v, Mapping) else {}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _without(v: Any, keys: tuple[str, ...] = _WORDS) -> Any:
    """An object without `keys` (by default those that only held words); anything else as it is."""
    return {k: x for k, x in v.items() if k not in keys} if isinstance(v, Mapping) else v


def migrate(doc: dict[str, Any]) -> dict[str, Any]:
    """Any perfcore document this version reads, in the shape it writes (already current: as it is)."""
    kind, _, n = str(doc.get("schema") or "").partition("/")
    if kind not in _MIGRATIONS or (int(n) if n.isdigit() else 0) >= CURRENT[kind]:
        return doc
    return _MIGRATIONS[kind](doc)


# ---- run.json


def migrate_run(doc: dict[str, Any]) -> dict[str, Any]:
    """A perfcore.run/1 document (a finished run's, or a part's) as perfcore.run/2."""
    dropped = ("recommendations", "missing_note", "step_source_note", "evidence", "step_source_text")
    out = {k: v for k, v in doc.items() if k not in dropped}
    out["schema"] = "perfcore.run/2"
    if isinstance(doc.get("evidence"), Mapping):  # /1 named what the advice is keyed to its evidence
        out["advice_facts"] = dict(doc["evidence"])
    if isinstance(doc.get("step_source_text"), str):
        out["optimizer_order"] = _optimizer_order(doc["step_source_text"])
    out.update({key: _without(doc[key]) for key in ("exit", "outcome", "loader_plan", "evaluation") if key in doc})
    if isinstance(doc.get("loader_plan"), Mapping) and not doc["loader_plan"].get("kind"):
        out.pop("loader_plan")  # a plan that kept its words only
    if isinstance(doc.get("interference"), Mapping):
        out["interference"] = interference(doc["interference"])
    rb = doc.get("breakdown_robust")
    if isinstance(rb, Mapping):
        out["breakdown_robust"] = {**_without(rb), "outliers": _without(rb.get("outliers"))}
    for key in ("stragglers", "waiting"):
        out[key] = [_without(x) for x in doc.get(key) or [] if isinstance(x, Mapping) and len(x) > 2]
    if isinstance(doc.get("memory"), Mapping):
        out["memory"] = _without(doc["memory"], ("findings",))
    if "no_step" in doc and isinstance(doc["no_step"], str):
        out["no_step"] = _no_step(doc["no_step"], _d(doc.get("seen")))
    if isinstance(doc.get("notes"), list):
        # A note /1 wrote for the capture's counts is said again from those counts (the capture facts); the
        # notes finishing a run wrote in words are kept as their codes and figures.
        out["notes"] = [
            _run_note(n)
            for n in doc["notes"]
            if isinstance(n, dict) or (isinstance(n, str) and not _CAPTURE_NOTE.search(n))
        ]
    v = doc.get("verdict")
    if isinstance(v, Mapping) and v.get("bound") not in (None, "unknown", "none"):
        out["verdict"] = migrate_verdict(v, doc)
    else:
        out.pop("verdict", None)  # undecided (no step, or a part)
    out["findings"] = _findings(doc.get("recommendations"), out.get("verdict"))
    if isinstance(doc.get("memory"), Mapping):  # an older document's findings that were no advice
        said = {f["kind"] for f in out["findings"]}
        more = (_memory_finding(f) for f in doc["memory"].get("findings") or [] if isinstance(f, Mapping))
        out["findings"] += [f for f in more if f is not None and f["kind"] not in said]
    return out


_CAPTURE_NOTE = re.compile(r"CUPTI records were dropped|CUPTI buffer\(s\) ended at")
# The notes /1's finish wrote in words, by their words -> their code and the figures in them.
_EVAL_ONLY = re.compile(r"((?:pid \d+(?:, )?)+) stepped no optimizer while other processes trained")
_APART = re.compile(r"other Python process\(es\) the script started \((.*)\) were measured apart")
_APART_ONE = re.compile(r"pid (\d+): (\d+) steps")
_FROM_CHECKPOINT = re.compile(r"these are its last checkpoint's, (\d+) settled steps")
_AFTERWARDS = re.compile(r"^finished afterwards by `perfcore report`.* so the exit code (-?\d+) is")


def _run_note(n: Any) -> Any:
    """A note /1's finish wrote in words as its code and figures; any other note as it is."""
    if not isinstance(n, str):
        return n
    m = _EVAL_ONLY.search(n)
    if m:
        return {"code": "evaluation_only", "figures": {"pids": [int(x) for x in re.findall(r"\d+", m.group(1))]}}
    m = _APART.search(n)
    if m:
        procs = [{"pid": int(a), "steps": int(b)} for a, b in _APART_ONE.findall(m.group(1))]
        return {"code": "measured_apart", "figures": {"processes": procs}}
    m = _FROM_CHECKPOINT.search(n)
    if m:
        return {"code": "from_checkpoint", "figures": {"steps": int(m.group(1))}}
    m = _AFTERWARDS.search(n)
    if m:
        return {"code": "finished_afterwards", "figures": {"exit_code": int(m.group(1))}}
    return n


def _optimizer_order(text: str) -> str | None:
    if "stepping in sequence" in text:
        return "both" if "within a stage" in text else "sequence"
    return "interleaved" if "stepping in one iteration" in text else None


# /1's no-step sentence began "no step seen in 4.2 s" and, with a forced source, "... s with --step-on X:".
_NO_STEP = re.compile(r"no\sstep\sseen\sin\s([\d.]+)\ss(?:\swith\s--step-on\s(\w+):)?")


def _no_step(sentence: str, seen: Mapping[str, Any]) -> dict[str, Any]:
    m = _NO_STEP.match(sentence)
    wall, forced = m.groups() if m else (None, None)
    return {
        "wall_s": float(wall) if wall else float(seen.get("wall_ms") or 0.0) / 1e3,
        "torch_instrumented": "could not instrument" not in sentence and "never imported torch" not in sentence,
        "torch_imported": "never imported torch" not in sentence,
        "optimizer_stepped": "optimizer steps" in sentence,
        "forced": forced,
        **{k: int(seen.get(k) or 0) for k in ("forward", "backward", "batch_all")},
    }


def interference(f: Mapping[str, Any]) -> dict[str, Any]:
    """An interference finding without its words; one written before its reasons were kept gets them from its
    figures, by the thresholds that made it material."""
    out = _without(f)
    if not isinstance(out.get("reasons"), list):
        out["reasons"] = reasons_of(f)
    out["material"] = bool(f.get("material"))
    return out


def migrate_verdict(v: Mapping[str, Any], doc: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A /1 verdict (its named causes, every label's avoidable ms and intervals, its words) as a /2 one: every
    cause ranked. One written before its figures were kept is judged again on the document's own figures."""
    if _num(v.get("step_ms")) is None and doc is not None:
        from perfcore.analysis.verdict import decide_run

        return to_doc(decide_run(doc))
    step = float(v.get("step_ms") or 0.0)
    named = {c.get("label"): c for c in v.get("causes") or [] if isinstance(c, Mapping)}
    bands = _d(v.get("avoidable_band_ms"))
    ranked = []
    for label, ms in _d(v.get("avoidable_ms")).items():
        c = named.get(label) or {}
        band = c.get("share_band")
        if band is None and bands.get(label) and step > 0:  # a minor cause kept its interval here only
            band = [x / step for x in bands[label]]
        gain = _d(c.get("expected_gain"))
        ranked.append(
            {
                "label": label,
                "bound": str(c.get("bound") or BOUNDS.get(label, label)),
                "ms_per_step": float(ms),
                "share": float(c.get("share", ms / step if step else 0.0)),
                "level": c.get("level", "minor"),
                "gain": {
                    "saved_ms": float(gain.get("saved_ms", ms)),
                    "step_after_ms": float(c.get("expected_step_ms", step - ms)),
                    "speedup": c.get("expected_speedup"),
                    "band": gain.get("band"),
                },
                "share_band": band,
                "borderline_tier": c.get("borderline_tier"),
            }
        )
    ranked.sort(key=lambda c: -c["ms_per_step"])
    th = _d(v.get("thresholds"))
    out: dict[str, Any] = {
        "bound": str(v.get("bound")),
        "level": v.get("level", "unknown"),
        "healthy": v.get("healthy"),
        "primary": v.get("primary"),
        "step_ms": step,
        "compute_ms": float(v.get("compute_ms") or 0.0),
        "ranked": ranked,
        "uncertain": bool(v.get("uncertain")),
        "on_gpu": bool(v.get("on_gpu")),
        "steps": int(v.get("steps") or 0),
        "measured_by": _d(v.get("measured_by")),
        "forward_only": bool(v.get("forward_only")),
        "outliers": int(_d(v.get("outliers")).get("count") or 0),
        "thresholds": [float(th.get("warn", 0.10)), float(th.get("critical", 0.20))],
        "focus_rank": v.get("focus_rank"),
    }
    su = v.get("startup")
    if isinstance(su, Mapping) and "share_of_run" in su:
        out["startup"] = _without(su)
    if isinstance(v.get("interference"), Mapping):
        out["interference"] = interference(v["interference"])
    # Their words (a wait's share, loading's cause) are no fields of the classes that read them: left unread.
    out.update(
        {
            k: v[k]
            for k in ("straggler", "oversubscribed", "threads_busy", "attributed", "loading")
            if isinstance(v.get(k), Mapping)
        }
    )
    out["checks"] = [migrate_check(c) for c in v.get("checks") or [] if isinstance(c, Mapping) and _checked(c)]
    return out


def _checked(c: Mapping[str, Any]) -> bool:
    """A check that kept its figures (an older one kept some beside its sentence, the oldest only the words)."""
    return "step_ms" in c or (
        _num(c.get("predicted_speedup")) is not None and _num(c.get("measured_speedup")) is not None
    )


def _experiment(name: str) -> str:
    return "B" if name.startswith("B:") else "C" if name.startswith("C:") else "A"


def migrate_check(c: Mapping[str, Any]) -> dict[str, Any]:
    """A /1 check of the verdict (diagnose.json's) as a /2 Check."""
    name = str(c.get("experiment") or "")
    # Its figures are a Check's fields of the same name; its words are none, left unread.
    out = {k: x for k, x in c.items() if x is not None}
    # Experiment B (the workers changed) has only ever been held to the bound removing all loading gives.
    bound = c.get("against") == "bound" or ("against" not in c and _experiment(name) == "B")
    out.update(name=name, experiment=_experiment(name), against="bound" if bound else "prediction")
    out.setdefault("label", "load")  # the one cause diagnose has ever checked
    status = c.get("status")
    if status == "no measurement":
        out.update(status="inconclusive", reason="no measurement")
    elif status is None and bound:  # held to a bound, not judged
        out["status"] = "bound"
    elif status is None:
        out["status"] = {True: "confirmed", False: "not confirmed"}.get(c.get("agrees"), "inconclusive")
    if out.get("reason") not in (None, "no measurement", "all one label", "noise", "compute drift"):
        out.pop("reason")
    if out["status"] not in ("confirmed", "partly", "not confirmed", "inconclusive", "bound"):
        out["status"] = "inconclusive"
    return out


def _level_of(verdict: Mapping[str, Any] | None, cause: Any) -> str:
    for c in (verdict or {}).get("ranked") or []:
        if c["label"] == cause and c["level"] in ("critical", "warn", "borderline"):
            return c["level"]
    return "warn"


def _measured_check(m: Any, label: str, against: str) -> dict[str, Any] | None:
    if not isinstance(m, Mapping) or _num(m.get("speedup")) is None:
        return None
    name = str(m.get("experiment") or "")
    band = m.get("band")
    return {
        "label": label,
        "experiment": _experiment(name),
        "name": name,
        "against": against,
        "measured_speedup": float(m["speedup"]),
        "measured_band": list(band) if isinstance(band, list) and len(band) == 2 else None,
        "change": m.get("change"),
        "material": bool(m.get("material")),
    }


def _findings(recs: Any, verdict: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """/1 recommendations (facts beside their words) as /2 findings; one that kept only its words is dropped."""
    out = []
    for r in recs if isinstance(recs, list) else []:
        if not isinstance(r, Mapping) or not isinstance(r.get("facts"), Mapping) or not r.get("id"):
            continue
        rid, facts = str(r["id"]), dict(r["facts"])
        if rid.startswith("memory_") and isinstance(facts.get("memory"), Mapping):
            f = _memory_finding(facts["memory"])
            if f is not None:
                out.append(f)
            continue
        facts.update({k: r[k] for k in ("decode", "threads_fit", "share_of_wall") if k in r})
        # a finding's own figures, without the words kept beside them
        facts.update({k: _without(facts[k]) for k in ("startup", "evaluation") if k in facts})
        cause = str(r.get("cause") or "")
        measured = (
            (r.get("measured"), "advice"),
            (_slower(r.get("decoder_slower")), "advice"),
            (r.get("ceiling"), "ceiling"),
        )
        checks = [c for c in (_measured_check(m, cause, against) for m, against in measured) if c is not None]
        gain = r.get("gain") if isinstance(r.get("gain"), Mapping) else None
        out.append(
            {
                "kind": rid,
                "level": _level_of(verdict, r.get("cause")),
                "cause": r.get("cause"),
                "figures": facts,
                "site": to_doc(Site.parse(r["site"])) if isinstance(r.get("site"), str) else None,
                "gain": dict(gain) if gain else None,
                "change": dict(r["set"]) if isinstance(r.get("set"), Mapping) else {},
                "test": r.get("test_with") if isinstance(r.get("test_with"), str) else None,
                "checks": checks,
            }
        )
    return out


def _slower(m: Any) -> dict[str, Any] | None:
    """A decoder measured slower or no faster: one written before its change was kept was slower."""
    return {**m, "change": m.get("change", "slower")} if isinstance(m, Mapping) else None


def _memory_finding(f: Mapping[str, Any]) -> dict[str, Any] | None:
    if f.get("id") not in ("memory_leak", "memory_pressure", "memory_near_capacity") or "sentence" in f and len(f) <= 3:
        return None
    return {"kind": f["id"], "level": "warn", "cause": "memory", "figures": _without(f)}


# ---- the triage commands' documents

# A sweep's knee /1 kept as its text: "batch 8: throughput stops improving at 1 worker(s) (311 samples/s...".
_KNEE = re.compile(r"batch\s(\d+):\sthroughput\sstops\simproving\sat\s(\d+)\sworker.*?\(([\d.]+)\ssamples/s")


_KNEE_WORSE = re.compile(r"([\d, ]+)\sare\sslower")
_KNEE_FLAT = re.compile(r"([\d, ]+)\sadd\sless\sthan\s(\d+)%")


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]


def _knee(k: Any) -> dict[str, Any] | None:
    if isinstance(k, dict):
        return k
    m = _KNEE.search(str(k))
    if not m:
        return None
    out = {"batch_size": int(m.group(1)), "workers": int(m.group(2)), "samples_per_s": float(m.group(3))}
    tail = str(k)[m.end() :]
    worse, flat = _KNEE_WORSE.search(tail), _KNEE_FLAT.search(tail)
    if worse:
        out["worse"] = _ints(worse.group(1))
    if flat:
        out.update(flat=_ints(flat.group(1)), within=int(flat.group(2)) / 100)
    return out


# A note /1 kept in words, by a phrase of its words -> its code.
_NOTE_CODES = {
    "runs its own loop": "script_loop",
    "declares no other decoder": "no_other_decoder",
    "declares no decoders": "script_decoders",
    "timed per batch": "timed_per_batch",
}


def _note(v: Any) -> str | None:
    if not isinstance(v, str):
        return None
    return next((code for phrase, code in _NOTE_CODES.items() if phrase in v), v)


def _script_exit(v: Any) -> dict[str, Any] | None:
    """A failed script's facts without the words /1 kept for how it ended (said again only from its code)."""
    if not isinstance(v, Mapping) or not isinstance(v.get("code"), int):
        return None
    return {k: v[k] for k in ("code", "steps", "run", "settings", "oom") if k in v and v[k] is not None}


def _stage(doc: dict[str, Any], kind: str, dropped: tuple[str, ...]) -> dict[str, Any]:
    """What a /1 health and diagnose document migrate alike: the verdict, interference and a failed script."""
    out = {k: v for k, v in doc.items() if k not in dropped}
    out["schema"] = f"{kind}/2"
    v = doc.get("verdict")
    out["verdict"] = migrate_verdict(v) if isinstance(v, Mapping) and v.get("bound") not in (None, "unknown") else None
    out["interference"] = interference(doc["interference"]) if isinstance(doc.get("interference"), Mapping) else None
    out["script_exit"] = _script_exit(doc.get("script_exit"))
    return out


def _health(doc: dict[str, Any]) -> dict[str, Any]:
    out = _stage(doc, "perfcore.health", ("summary", "plain_summary", "uncertain"))
    out["heartbeat"] = _without(doc["heartbeat"]) if isinstance(doc.get("heartbeat"), Mapping) else None
    out["note"] = _note(doc.get("note"))
    return out


def _diagnose(doc: dict[str, Any]) -> dict[str, Any]:
    out = _stage(doc, "perfcore.diagnose", ("recommendations",))
    out["experiments"] = [
        {**e, "experiment": "baseline" if e.get("name") == "baseline" else _experiment(str(e.get("name") or ""))}
        for e in doc.get("experiments") or []
        if isinstance(e, Mapping)
    ]
    loading = _loading(doc)
    if out["verdict"] is not None and "loading" not in out["verdict"] and loading is not None:
        out["verdict"]["loading"] = loading
    recs = doc.get("recommendations")
    out["findings"] = None if recs is None else _findings(recs, out["verdict"])
    plan = doc.get("loader_plan")
    out["loader_plan"] = _without(plan) if isinstance(plan, Mapping) and plan.get("kind") else None
    profile = doc.get("worker_profile")
    if isinstance(profile, Mapping):
        out["worker_profile"] = {**profile, "note": _note(profile.get("note"))}
    return out


# What an older diagnose said loading was, in words (its verdict's "cause"), -> the kind it is now kept as.
_LOADING_KINDS = {"CPU decode/augment": "cpu", "I/O": "io", "CPU decode": "decoder"}


def _loading(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """An older diagnose's loading cause, kept as words, as the kind and the figures its document holds (the
    worker profile's, experiment C's), where the words name one kind."""
    kind = _LOADING_KINDS.get(str(_d(doc.get("verdict")).get("cause")))
    prof = _d(doc.get("worker_profile"))
    ratio = _num(prof.get("cpu_to_wall"))
    if kind == "decoder":
        c = next((e for e in doc.get("experiments") or [] if isinstance(e, Mapping) and _experiment(str(e.get("name"))) == "C"
                  and str(e.get("name")).startswith("C:")), None)  # fmt: skip
        return {"kind": kind, "decoder": c.get("decoder"), "speedup": _num(c.get("speedup"))} if c else None
    if kind is None or ratio is None:
        return None
    top = prof.get("top")
    first = top[0].get("function") if isinstance(top, list) and top and isinstance(top[0], Mapping) else None
    return {"kind": kind, "cpu_to_wall": ratio, "top": first if kind == "cpu" else None}


def _demo(doc: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in doc.items() if k not in ("agree", "bounds")}
    out["schema"] = "perfcore.experiments.demo/2"
    for key, stage in (("health", _health), ("run", migrate_run), ("diagnose", _diagnose)):
        if isinstance(doc.get(key), dict):
            out[key] = stage(doc[key])
    out["files"] = list(doc.get("files") or [])
    return out


def _sweep(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "schema": "perfcore.sweep/2", "knees": [k for k in map(_knee, doc.get("knees") or []) if k]}


_MIGRATIONS = {
    "perfcore.run": migrate_run,
    "perfcore.health": _health,
    "perfcore.diagnose": _diagnose,
    "perfcore.sweep": _sweep,
    "perfcore.experiments.demo": _demo,
}
