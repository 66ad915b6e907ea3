"""Prompts are generated from the registry: a new skill or a new scene changes the listing."""

from __future__ import annotations

import ast

import pytest

from robocompose.hierarchical.base import Param, Skill, SkillResult
from robocompose.hierarchical.planners.prompts import (
    DEFINE_EXAMPLES,
    EXAMPLES,
    api_listing,
    code_messages,
    define_messages,
    scene_summary,
    skill_list,
    usable_define_examples,
    usable_examples,
)
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import SimWorld


@pytest.fixture(scope="module")
def sort_world():
    world = SimWorld("SortBins")
    world.reset(3)
    yield world
    world.close()


def test_listing_is_generated_from_the_registry(sort_world):
    registry = build_registry(sort_world)
    listing = api_listing(list(registry.values()), registry.queries.values())
    tree = ast.parse(listing)  # the listing is valid Python
    defined = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert defined == [*registry, *registry.queries]
    for name in sort_world.objects() + sort_world.bins():
        assert name in listing  # choices come from the scene
    assert "def place_in(obj: str, bin: str):" in listing
    assert "def position(name: str) -> list[float]:" in listing
    assert "in [-0.2, 0.2]" in listing  # ranges from the Param specs

    def wave(world, **args):
        return SkillResult(True)

    extra = Skill("wave", "Wave hello.", (Param("times", "int", "how often", low=1, high=3),), wave)
    assert 'def wave(times: int):\n    """Wave hello. times: how often; in [1, 3]."""' in (
        api_listing([*registry.values(), extra])
    )


def test_scene_summary_reads_a_snapshot(sort_world):
    summary = scene_summary(sort_world.snapshot())
    lines = summary.splitlines()
    assert len(lines) == len(sort_world.objects()) + len(sort_world.bins()) + 1
    first = sort_world.objects()[0]
    x, y, z = sort_world.position(first)
    assert lines[0].startswith(f"{first} at ({x:.2f}, {y:.2f}, {z:.2f}) on table")
    assert lines[-1] == "holding: nothing"
    assert scene_summary("  two blocks  ") == "two blocks"


def test_examples_fit_the_api_or_are_left_out(sort_world):
    registry = build_registry(sort_world)
    skills = list(registry.values())
    everything = set(registry) | set(registry.queries)
    assert usable_examples(skills, everything) == list(EXAMPLES)
    assert usable_examples(skills, set(registry)) == [EXAMPLES[0]]  # the loop needs objects()
    renamed = [s for s in skills if s.name != "place"]
    assert usable_examples(renamed) == []
    messages = code_messages("LISTING", EXAMPLES, "a scene", "do it", feedback="call 2 failed")
    assert messages[0]["role"] == "system" and messages[0]["content"].startswith("LISTING\n")
    assert [m["role"] for m in messages[1:]] == ["user", "assistant"] * len(EXAMPLES) + ["user"]
    assert "# call 2 failed" in messages[-1]["content"]
    assert "# task: do it" in messages[-1]["content"]
    assert usable_define_examples({"pick"}) == []
    examples = usable_define_examples({"pick", "place"})
    assert examples == list(DEFINE_EXAMPLES)
    asking = define_messages("LISTING", examples, "lift_all", "lift_all(objects())")
    assert messages[0] == asking[0]  # one system message: a local model reuses its prefix
    assert asking[-1]["content"].endswith("# define the function `lift_all`")


def test_skill_list_refuses_other_things():
    with pytest.raises(TypeError, match="holds `Skill` objects"):
        skill_list(["pick"])
