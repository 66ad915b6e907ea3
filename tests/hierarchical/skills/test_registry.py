"""The registry: refusals naming the skill and parameter, binding, mapping, prompt listings."""

from __future__ import annotations

import ast
import json

import pytest

from robocompose.hierarchical.base import Param, Skill, SkillResult
from robocompose.hierarchical.skills.registry import SkillError, SkillRegistry, check_args, suggest
from robocompose.hierarchical.skills.scripted import DIRECTIONS, build_registry
from robocompose.hierarchical.world import SimWorld


@pytest.fixture(scope="module")
def registry() -> SkillRegistry:
    world = SimWorld("Stack")
    yield build_registry(world)
    world.close()


# -- validation ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("pik", {"obj": "red_block"}, r"unknown skill 'pik'; did you mean 'pick'\?"),
        ("pick", {"obj": "purple_block"}, r"`pick` argument `obj` must be one of .*purple"),
        ("pick", {"obj": "red"}, r"Did you mean 'red_block'\?"),
        ("pick", {"obj": 3}, r"`obj` must be a string. Got int"),
        ("pick", {}, r"`pick` is missing the argument `obj`"),
        ("pick", {"obj": "red_block", "force": 1}, r"`pick` takes no argument 'force'"),
        ("move_to", {"x": 0.5, "y": 0.0, "z": 0.1}, r"`x` must be in \[-0.2, 0.2\]. Got 0.5"),
        ("move_to", {"x": 0.0, "y": 0.0, "z": -0.1}, r"`z` must be in \[0.015, 0.25\]"),
        ("move_to", {"x": "0.1", "y": 0.0, "z": 0.1}, r"`x` must be a number. Got str"),
        ("move_to", {"x": True, "y": 0.0, "z": 0.1}, r"`x` must be a number. Got bool"),
        ("move_to", {"x": float("nan"), "y": 0.0, "z": 0.1}, r"`x` must be finite"),
        ("push", {"obj": "red_block", "direction": "up", "distance": 0.05}, r"`direction`"),
        ("push", {"obj": "red_block", "direction": "left", "distance": 1.0}, r"`distance`"),
        ("place", {"obj": "red_block", "target": "red_bin"}, r"`target` must be one of"),
    ],
)
def test_bad_calls_are_refused_by_name(
    registry: SkillRegistry, name: str, args: dict, message: str
) -> None:
    with pytest.raises(SkillError, match=message):
        registry.validate(name, args)


def test_positional_binding(registry: SkillRegistry) -> None:
    assert registry.bind("move_to", (0.1, 0.0), {"z": 0.2}) == {"x": 0.1, "y": 0.0, "z": 0.2}
    with pytest.raises(SkillError, match="twice"):
        registry.bind("pick", ("red_block",), {"obj": "red_block"})
    with pytest.raises(SkillError, match="takes 1 arguments"):
        registry.bind("pick", ("red_block", "blue_block"))


def test_check_args_types() -> None:
    params = (Param("n", "int", low=1, high=3), Param("v", "vec2", low=0.0, high=1.0))
    assert check_args("s", params, {"n": 2, "v": [0, 0.5]}) == {"n": 2, "v": [0.0, 0.5]}
    with pytest.raises(SkillError, match="`n` must be an integer"):
        check_args("s", params, {"n": 2.0, "v": [0, 0]})
    with pytest.raises(SkillError, match=r"`v` must be in \[0.0, 1.0\]"):
        check_args("s", params, {"n": 2, "v": [0, 2]})


# -- registry and listings ---------------------------------------------------------------------
def test_registry_is_a_mapping_that_swaps_implementations(registry: SkillRegistry) -> None:
    assert set(registry) == {
        "move_to",
        "open_gripper",
        "close_gripper",
        "pick",
        "place",
        "place_at",
        "push",
    }
    own = SkillRegistry(registry.values())
    with pytest.raises(ValueError, match="already registered"):
        own.add(registry["pick"])
    other = Skill("pick", "a test double", (), lambda world: SkillResult(True))
    own.add(other, replace=True)
    assert own["pick"] is other


def test_python_api_lists_signatures_and_docstrings(registry: SkillRegistry) -> None:
    api = registry.python_api()
    tree = ast.parse(api)  # the listing is valid Python
    names = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert names == [*registry, *registry.queries]
    assert "def pick(obj: str) -> bool:" in api
    assert "'red_block', 'green_block', 'blue_block'" in api
    assert "def move_to(x: float, y: float, z: float) -> bool:" in api and "in [-0.2, 0.2]" in api
    assert "def position(name: str) -> list[float]:" in api


def test_json_spec_describes_every_skill(registry: SkillRegistry) -> None:
    spec = json.loads(json.dumps(registry.json_spec()))
    by_name = {item["name"]: item for item in spec}
    assert set(by_name) == set(registry) | set(registry.queries)
    assert by_name["pick"]["kind"] == "skill" and by_name["objects"]["kind"] == "query"
    assert by_name["push"]["params"]["direction"]["choices"] == list(DIRECTIONS)
    assert by_name["move_to"]["params"]["z"]["low"] == pytest.approx(0.015)


def test_suggestions() -> None:
    names = ["red_block", "green_block", "blue_block"]
    assert suggest("red", names) == "red_block"
    assert suggest("gren_block", names) == "green_block"
    assert suggest("block", names) is not None and suggest("table", names) is None
