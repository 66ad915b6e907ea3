"""Ablation sweeps: a grid of compositions from Hydra configs, every episode a row of one table,
run here or on Ray, summarised as a markdown table and one plot per axis."""

from robocompose.sweep.config import SweepConfig, plan
from robocompose.sweep.run import SweepReport, run_sweep

__all__ = ["SweepConfig", "SweepReport", "plan", "run_sweep"]
