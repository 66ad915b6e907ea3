"""Finding the calls: a goal state and the declared operators handed to a planning library.

    calls = find_plan(start, goal, operators, scene)               # pyperplan (default)
    calls = find_plan(start, goal, operators, scene, engine="fast-downward")

`start` and `goal` are sets of facts; the answer is a list of `GroundOperator`s (each knows its
skill and arguments) or None when the library proves no plan exists. Both engines search for a
shortest plan: pyperplan's breadth-first search on the grounded task (pure Python, in process),
or Fast Downward (`up-fast-downward`, optimal configuration) through unified-planning, which
builds a lifted PDDL problem and runs the planner as a subprocess. `benchmarks/goal_planning.py`
times both on the scenes' domains; docs/planning.md says which is the default and why.
"""

from __future__ import annotations

from collections.abc import Sequence

from robocompose.hierarchical.goal.facts import SceneNames
from robocompose.hierarchical.goal.strips import Fact, GroundOperator, State, StripsOperator, ground

ENGINES = ("pyperplan", "fast-downward")


def _key(fact: Fact) -> str:
    return "(" + " ".join(fact) + ")"


def find_plan(
    start: State,
    goal: frozenset[Fact],
    operators: Sequence[StripsOperator],
    scene: SceneNames,
    engine: str = "pyperplan",
) -> list[GroundOperator] | None:
    """A shortest sequence of ground operators from `start` to a state holding `goal`."""
    if engine not in ENGINES:
        raise ValueError(f"`engine` must be one of {ENGINES}. Got {engine!r}.")
    if goal <= start:
        return []
    if engine == "pyperplan":
        return _pyperplan(start, goal, ground(operators, scene.objects))
    return _fast_downward(start, goal, operators, scene)


def _pyperplan(
    start: State, goal: frozenset[Fact], grounded: Sequence[GroundOperator]
) -> list[GroundOperator] | None:
    from pyperplan.search import breadth_first_search
    from pyperplan.task import Operator as PyperOperator
    from pyperplan.task import Task

    by_name = {op.name: op for op in grounded}
    ops = [
        PyperOperator(
            op.name,
            frozenset(map(_key, op.pre)),
            frozenset(map(_key, op.add)),
            frozenset(map(_key, op.delete)),
        )
        for op in grounded
    ]
    facts = set(map(_key, start)) | set(map(_key, goal))
    for op in grounded:
        facts |= set(map(_key, op.pre | op.add | op.delete))
    task = Task("robocompose", facts, frozenset(map(_key, start)), frozenset(map(_key, goal)), ops)
    solution = breadth_first_search(task)
    return None if solution is None else [by_name[op.name] for op in solution]


def _fast_downward(
    start: State, goal: frozenset[Fact], operators: Sequence[StripsOperator], scene: SceneNames
) -> list[GroundOperator] | None:
    import unified_planning.shortcuts as up
    from unified_planning.engines import PlanGenerationResultStatus

    from robocompose.hierarchical.goal.strips import instantiate

    up.get_environment().credits_stream = None
    types = {kind: up.UserType(kind) for kind in scene.objects}
    objects = {
        name: up.Object(name, types[kind])
        for kind, names in scene.objects.items()
        for name in names
    }
    signatures: dict[str, tuple[str, ...]] = {}
    for op in operators:
        kinds = dict(op.params)
        for fact in (*op.pre, *op.add, *op.delete):
            signatures.setdefault(
                fact[0], tuple(kinds[t] if t in kinds else _kind_of(t, scene) for t in fact[1:])
            )
    for fact in (*start, *goal):
        signatures.setdefault(fact[0], tuple(_kind_of(t, scene) for t in fact[1:]))
    fluents = {
        name: up.Fluent(name, up.BoolType(), **{f"a{k}": types[t] for k, t in enumerate(sig)})
        for name, sig in signatures.items()
    }
    problem = up.Problem("robocompose")
    for fluent in fluents.values():
        problem.add_fluent(fluent, default_initial_value=False)
    problem.add_objects(objects.values())
    actions = {}
    for op in operators:
        action = up.InstantaneousAction(op.name, **{v[1:]: types[k] for v, k in op.params})
        params = {v: action.parameter(v[1:]) for v, _ in op.params}

        def term(fact: Fact, params=params):
            return fluents[fact[0]](*(params.get(t) or objects[t] for t in fact[1:]))

        for fact in op.pre:
            action.add_precondition(term(fact))
        vars_ = [params[v] for v, _ in op.params]
        for k, a in enumerate(vars_):  # every variable a different object
            for b in vars_[k + 1 :]:
                if a.type == b.type:
                    action.add_precondition(up.Not(up.Equals(a, b)))
        for fact in op.delete:
            action.add_effect(term(fact), False)
        for fact in op.add:
            action.add_effect(term(fact), True)
        problem.add_action(action)
        actions[op.name] = op
    for fact in start:
        problem.set_initial_value(fluents[fact[0]](*(objects[t] for t in fact[1:])), True)
    for fact in goal:
        problem.add_goal(fluents[fact[0]](*(objects[t] for t in fact[1:])))
    with up.OneshotPlanner(name="fast-downward-opt") as planner:
        result = planner.solve(problem)
    if result.status not in (
        PlanGenerationResultStatus.SOLVED_SATISFICING,
        PlanGenerationResultStatus.SOLVED_OPTIMALLY,
    ):
        return None
    plan = []
    for step in result.plan.actions:
        op = actions[step.action.name]
        values = {v: str(p) for (v, _), p in zip(op.params, step.actual_parameters, strict=True)}
        plan.append(instantiate(op, values))
    return plan


def _kind_of(name: str, scene: SceneNames) -> str:
    for kind, names in scene.objects.items():
        if name in names:
            return kind
    raise ValueError(f"unknown object {name!r}: not a block or bin of the scene.")
