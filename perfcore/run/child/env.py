"""perfcore's variables as the instrumented child reads them. A bad value (a child Python that
inherited a stale or hand-set variable) never raises into the script: one line, and the default."""
from __future__ import annotations

import json
import os
import sys

from perfcore.run import protocol

__all__ = ["env_int", "env_float", "env_json", "env_step_on"]


def env_int(name: str, default: int) -> int:
    """A whole number >= 0 from perfcore's environment. A bad value (a child Python inheriting a
    stale or hand-set variable) never raises into the script: one line, and the default."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
        if value >= 0:
            return value
    except ValueError:
        pass
    sys.stderr.write(f"perfcore: {name}={raw!r} is not a whole number >= 0 (set in the environment?); "
                     f"using {default}\n")
    return default


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
        if value >= 0 and value == value:
            return value
    except ValueError:
        pass
    sys.stderr.write(f"perfcore: {name}={raw!r} is not a number of seconds >= 0; using {default:g}\n")
    return default


def env_json(name: str) -> dict:
    raw = os.environ.get(name) or "{}"
    try:
        value = json.loads(raw)
        if isinstance(value, dict):
            return value
    except ValueError:
        pass
    sys.stderr.write(f"perfcore: {name}={raw!r} is not a JSON object of DataLoader settings; ignored\n")
    return {}


def env_step_on() -> str | None:
    raw = os.environ.get(protocol.ENV_STEP_ON) or None
    if raw is None or raw in protocol.STEP_SOURCES:
        return raw
    sys.stderr.write(f"perfcore: {protocol.ENV_STEP_ON}={raw!r} is not one of {', '.join(protocol.STEP_SOURCES)}; "
                     "choosing the step source automatically\n")
    return None
