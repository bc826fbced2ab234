"""A module imported on its first attribute use: `pd = lazy_module("pandas")`.

pandas costs ~0.3 s to import. The recording engine needs it only when it settles steps, so an
instrumented script whose run is short never pays it (its part is finished by the parent, which has
pandas loaded already)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["lazy_module"]


class _LazyModule:
    __slots__ = ("_name", "_module")

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}{'' if self._module is None else ' (loaded)'}>"


def lazy_module(name: str) -> Any:
    return _LazyModule(name)
