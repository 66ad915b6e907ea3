"""Compose pretrained policies at test time: operators on denoisers, samplers, weight search.

    from robocompose.composition import load, compose, evaluate, search

Where things are:

    config.py             CompositionConfig: operator, weights, sampler, grid (data, no torch)
    methods.py            the method registry: what a method needs and how it runs
    builtin_methods.py    the shipped methods (convex, weighted_sum, guided, schedule,
                          superdiff_and/or, mixture, selector, merge)
    operators.py          operators on the parents' denoiser outputs (convex, product, guided)
    samplers.py           samplers in sigma space (Euler, Heun, ancestral, annealed MCMC)
    superdiff.py          SuperDiff AND/OR's own sampler
    selector.py           the selector's candidates and scores
    verifier.py           a learned chunk verifier (the selector's score "verifier"), its file
    verifier_config.py    how a verifier trains (data, no torch)
    verifier_training.py  training one on chunk logs, its held-out AUC
    counterfactual.py     counterfactual labels: each selector candidate run from one restored
                          state and finished by one policy on one noise (counterfactual_file.py:
                          their file; counterfactual_scores.py: how each score ranks them)
    merge.py              the parameter merge (model soup)
    fused.py              the parents' backbones run as one stacked network
    composed_denoiser.py  ComposedDenoiser: the parents' denoisers as one, by an operator
    timing.py             what each parent costs per chunk
    composed_policy.py    ComposedPolicy: K parents and a method, run by the harness
    weight_search.py      the search over compositions, every searchable method's candidates
                          and each parent alone in one pool (grid, racing, halving)
    search_plot.py        a search's figure
    search_record.py      what a search ran on, its record on disk, its resume
    api.py                load, compose, evaluate, search: the notebook API the verbs call

The layers run one way: config <- methods <- weight_search <- builtin_methods <- composed_policy
<- api (tests/test_import_cycles.py fails on any import cycle).
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
