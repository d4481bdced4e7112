"""Import a package's public names on first use, so that importing the package stays light."""

from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict[str, str], public: list[str]):
    """(__getattr__, __dir__) for `package`: exports maps a name to the submodule that defines it."""

    def __getattr__(name: str):
        if name in exports:
            return getattr(importlib.import_module(f".{exports[name]}", package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(importlib.import_module(package).__dict__) | set(public))

    return __getattr__, __dir__
