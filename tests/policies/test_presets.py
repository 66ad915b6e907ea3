"""Every recipe a shipped checkpoint was trained with (family, backbone, diffusion's prediction
type) has a `policy=` preset, so `train policy=<name>` reproduces it without the Makefile."""

from __future__ import annotations

import json

import pytest

from robocompose.cli import load_verb_config
from robocompose.config import group_options
from robocompose.shipped import CHECKPOINTS


def recipe(policy: dict) -> tuple[str, str, str | None]:
    """What a preset fixes: the family, the backbone and a diffusion's prediction type."""
    target = policy.get("prediction_type", "epsilon") if policy["family"] == "diffusion" else None
    return policy["family"], policy["backbone"], target


@pytest.fixture(scope="module")
def preset_recipes() -> dict[tuple, str]:
    out = {}
    for preset in group_options("policy"):
        config = load_verb_config("train", ["dataset=d", "out=o", f"policy={preset}"]).policy
        out[recipe(config.to_dict())] = preset
    return out


SHIPPED = sorted(p.parent.name for p in CHECKPOINTS.glob("*/config.json"))


@pytest.mark.parametrize("checkpoint", SHIPPED)
def test_every_shipped_recipe_has_a_preset(checkpoint: str, preset_recipes: dict) -> None:
    policy = json.loads((CHECKPOINTS / checkpoint / "config.json").read_text())["policy"]
    assert recipe(policy) in preset_recipes, f"no policy= preset trains {checkpoint}"


def test_the_v_prediction_diffusion_mlp_preset() -> None:
    config = load_verb_config("train", ["dataset=d", "out=o", "policy=diffusion_mlp"]).policy
    assert (config.family, config.backbone, config.prediction_type) == (
        "diffusion",
        "mlp",
        "v_prediction",
    )
