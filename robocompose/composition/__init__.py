"""Compose pretrained policies at test time: operators on denoisers, samplers, weight search."""

from robocompose.composition.api import compose, evaluate, load, search

__all__ = ["compose", "evaluate", "load", "search"]
