"""Compose pretrained policies at test time: operators on denoisers, samplers, weight search.

    from robocompose.composition import load, compose, evaluate, search

Where things are (each layer imports only the ones above it; tests/test_import_cycles.py):

    config.py           CompositionConfig: operator, weights, sampler, grid (data, no torch)
    methods.py          the method registry: what a method needs and how it runs
    builtin_methods.py  the shipped methods (convex, weighted_sum, guided, schedule,
                        superdiff_and/or, mixture, selector, merge)
    operators.py        operators on the parents' denoiser outputs (convex, product, guided, ...)
    samplers.py         samplers in sigma space (Euler, Heun, ancestral, annealed MCMC)
    superdiff.py        SuperDiff AND/OR's own sampler;  selector.py: the selector's candidates
    merge.py            the parameter merge (model soup)
    fused.py            parents' backbones run as one stacked network
    composed.py         ComposedDenoiser: K parents' denoisers as one
    timing.py           what each parent costs per chunk
    policy.py           ComposedPolicy: K parents and a method, run by the harness
    weight_search.py    the search over weights (grid, racing, successive halving)
    search_record.py    what a search ran on, its record on disk and resume
    api.py              load, compose, evaluate, search: the notebook API and the verbs'
"""

from __future__ import annotations

from typing import Any

# registers the shipped methods before any lookup: a light module (no torch)
from robocompose.composition import builtin_methods  # noqa: F401

__all__ = ["compose", "evaluate", "load", "search"]


def __getattr__(name: str) -> Any:
    """The API functions, imported on first use: they load torch, and this package also holds
    the light config modules that every verb's config imports."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from robocompose.composition import api

    globals().update({n: getattr(api, n) for n in __all__})
    return globals()[name]
