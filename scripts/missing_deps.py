"""Prints, one per line, what pyproject.toml declares (the dependencies, the test and gpu extras)
and the build tools need that this Python lacks or has too old; torch is left to scripts/setup.sh.

Usage: python scripts/missing_deps.py [PYPROJECT]   (runs on any Python that has pip)
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    from pip._vendor import tomli as tomllib
from pip._vendor.packaging.requirements import Requirement

BUILD_TOOLS = ["ninja", "setuptools>=64", "wheel"]


def missing(project: dict) -> list[str]:
    extras = project.get("optional-dependencies", {})
    out = []
    for spec in project["dependencies"] + extras.get("test", []) + extras.get("gpu", []) + BUILD_TOOLS:
        req = Requirement(spec)
        if req.name == "torch" or (req.marker and not req.marker.evaluate()):
            continue
        try:
            if req.specifier.contains(version(req.name), prereleases=True):
                continue
        except PackageNotFoundError:
            pass
        out.append(spec)
    return out


if __name__ == "__main__":
    with open(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml", "rb") as f:
        print("\n".join(missing(tomllib.load(f)["project"])))
