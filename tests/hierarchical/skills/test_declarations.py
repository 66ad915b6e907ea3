"""One declaration per skill feeds the skill's own precondition check, the planners' prompt
listing and the goal planner's domain (the same operator objects, no second copy)."""

from __future__ import annotations

from robocompose.hierarchical.goal.strips import Violation, step
from robocompose.hierarchical.planners.goal import planning_operators
from robocompose.hierarchical.planners.prompts import api_listing
from robocompose.hierarchical.skills.declarations import PICK, PLACE, PLACE_AT, PLACE_IN
from robocompose.hierarchical.skills.scripted import build_registry
from robocompose.hierarchical.world import SimWorld


def test_the_registry_carries_the_declarations_and_the_domain_reads_them():
    world = SimWorld("SortBins", {"blocks": ("red", "green")})
    registry = build_registry(world)
    assert registry["pick"].operators is PICK and registry["place"].operators is PLACE
    assert registry["place_at"].operators is PLACE_AT and registry["place_in"].operators is PLACE_IN
    assert registry["move_to"].operators == () and registry["push"].operators == ()
    domain = planning_operators(registry)
    assert all(any(op is d for d in domain) for op in PICK + PLACE + PLACE_AT)
    listing = api_listing(list(registry.values()), registry.queries.values())
    assert "Needs hand_empty, clear(obj), and on_table(obj) or on(obj, below)" in listing
    assert "Needs holding(obj), and clear(target) or empty(target)" in listing
    world.close()


def test_the_skill_refuses_what_its_declaration_refuses():
    world = SimWorld("Stack", {"blocks": ("red", "green", "blue"), "order": ("red", "green")})
    world.arrange([("on", "green_block", "red_block")])
    registry = build_registry(world)
    found = step(world.facts(), "pick", {"obj": "red_block"}, PICK, {"block": world.objects()})
    assert isinstance(found, Violation) and found.fact == ("clear", "red_block")
    assert not registry["pick"].precondition(world, obj="red_block")
    result = registry["pick"].run(world, obj="red_block")
    assert (
        not result.success
        and result.message == "cannot pick: green_block rests on red_block; move it first"
    )
    assert registry["pick"].precondition(world, obj="green_block")
    world.close()
