"""Compose pretrained policies at test time: operators on denoisers, samplers, weight search."""

from __future__ import annotations

from typing import Any

__all__ = ["compose", "evaluate", "load", "search"]


def __getattr__(name: str) -> Any:
    """The API functions, imported on first use: they load torch, and this package also holds
    the light config modules that every verb's config imports."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from robocompose.composition import api

    # importing `api` imports the submodule `search`; the package's `search` is the function
    globals().update({n: getattr(api, n) for n in __all__})
    return globals()[name]
