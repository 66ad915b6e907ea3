"""Goal planner: the LLM states the goal, a solver pins it down, a planning library finds the
calls.

    planner = GoalPlanner(llm, registry, world)
    plan = planner.plan("put green on red, then blue on green", world.snapshot())
    plan.kind        "calls" (run them), "ask" (plan.question) or "refuse" (plan.refusal)
    plan.constraints "on(green, red); on(blue, green)"      plan.goal.facts  plan.calls

1. The LLM rewrites the request into the constraint language (`goal.constraints`), decoding
   under a grammar generated from the scene (`goal.grammar`): only the scene's blocks and bins
   can be named. Backends without GBNF (OpenAI-compatible) answer free, and text that does not
   parse goes back to them with the parser's message. It rewrites it more than once (the
   examples or the scene listed in other orders; optionally a second reader, another model or
   prompt), and a goal stands only when every reading solves to it: else the planner asks
   which reading was meant.
2. The solver (`goal.solver`) turns the statements into the one configuration that satisfies
   them with the fewest calls from the facts now; it asks back when several are equally near
   or the request is unclear, and refuses when none exists, a name is missing, or the skills
   cannot do it. Nothing moves in those cases.
3. A planning library (`goal.search`, pyperplan by default) finds the calls from the skills'
   declared operators (pick, place, place_at); place_at gets a free table spot outside the bins.

After a failed call the next round re-plans from the observed facts to the same goal, without
asking the LLM again (the instruction is unchanged): repair costs no LLM call. A new
instruction, or `reset_goal()`, asks the LLM again.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from robocompose.choices import check_choice
from robocompose.hierarchical.base import Completion, LLMBackend, Message, Plan, SkillCall
from robocompose.hierarchical.goal.constraints import ConstraintSyntaxError, parse
from robocompose.hierarchical.goal.facts import SceneNames
from robocompose.hierarchical.goal.grammar import gbnf
from robocompose.hierarchical.goal.grounding import (
    bare_bin,
    beyond_skills,
    missing_names,
    ungrounded_blocks,
)
from robocompose.hierarchical.goal.lifting import Lifted, lift
from robocompose.hierarchical.goal.prompt import (
    example_orders,
    messages,
    scene_orders,
    short_messages,
)
from robocompose.hierarchical.goal.search import ENGINES, find_plan
from robocompose.hierarchical.goal.solver import (
    Goal,
    Outcome,
    Question,
    Refusal,
    goal_facts,
    same_goal,
    scene_names,
    solve,
)
from robocompose.hierarchical.goal.strips import GroundOperator, State, StripsOperator
from robocompose.hierarchical.skills.declarations import PLANNING_SKILLS

if TYPE_CHECKING:
    from robocompose.hierarchical.llm import LLMConfig

SPOT_GRID_M = 0.03  # place_at spots are searched on this grid
SPOT_RANGE_M = 0.15  # ... within [-range, range]^2
SPOT_GAP_M = 0.10  # ... this far from every block, bin centre and spot already chosen
MAX_REWRITES = 2  # LLM answers that do not parse (free decoding only) before giving up
PROMPTS = ("examples", "adapted", "lifted")
_BIN_NAME = re.compile(r"\b\w+_bin\b")  # a bin in constraint text ("red_bin", "any_bin")
ADAPTED_ORDERS = 2  # scene orders the adapted model's rewrites must agree across (measured)
# the readings a local model with a shipped adapter plans with (`robocompose plan goal_readings=`):
# the few-shot base model, the adapted model, or the adapted model checked by the few-shot one
READINGS = ("examples", "adapted", "both")
Rewrite = tuple[str, tuple[Completion, ...], str | None]  # text, completions, parse problem
CHANNEL_MARGIN = 2.0  # nats the likeliest goal must lead the next by (noisy channel)
CHANNEL_PROMPT = "The robot's goal: {goal}.\nWhat the person said to ask for it:"


@dataclass(frozen=True)
class GoalPlannerConfig:
    """`constrain`: "grammar" (GBNF, local backends) or "none" (free text, checked after).
    `orders`: rewrites with the few-shot examples in that many orders (1-4); a goal stands only
    when they all solve to it, else the planner asks which reading was meant.
    `prompt`: "examples" (few-shot, any model), "adapted" (the short prompt without examples,
    for a model adapted to the constraint language, `hierarchical.adapter`; its orders list the
    scene's blocks in other orders) or "lifted" (the adapted prompt over placeholders,
    `goal.lifting`, for an adapter trained on lifted requests).
    `second_prompt`: a second reader's prompt (None: none): once the first readings agree, the
    second reader (`GoalPlanner(second=...)`, another model or the same one) rewrites the
    request under it in `second_orders` orders, and the goal stands only if those solve to it
    too. Two models that err differently rarely agree on the same wrong goal.
    `revise`: when the readings disagree, the first reader sees each reading said back in plain
    words and writes once more; `revise_solver`: also when the first reading's constraints give
    no single goal (a contradiction, several goals), told the solver's message.
    `noisy_channel`: among the goals still in the running, the one under which the request is
    likeliest (the second reader's, else the first's, log-probability of the request's words
    after the goal said in plain words) stands when it leads the next by `channel_margin` nats
    and more readings gave it than gave no goal; else the planner asks, naming every reading."""

    engine: str = "pyperplan"
    constrain: str = "grammar"
    max_tokens: int = 96  # a long conditional is ~40 tokens; the grammar ends the text
    orders: int = 3
    prompt: str = "examples"
    second_prompt: str | None = None
    second_orders: int = 1
    revise: bool = False  # off until measured on the dev split with the corpus-trained adapter
    revise_solver: bool = False  # measured: it turned infeasible requests into moves
    noisy_channel: bool = False
    channel_margin: float = CHANNEL_MARGIN

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"`engine` must be one of {ENGINES}. Got {self.engine!r}.")
        if self.constrain not in ("grammar", "none"):
            raise ValueError(f"`constrain` must be 'grammar' or 'none'. Got {self.constrain!r}.")
        if self.max_tokens < 8:
            raise ValueError(f"`max_tokens` must be >= 8. Got {self.max_tokens}.")
        if not 1 <= self.orders <= 4:
            raise ValueError(f"`orders` must be 1 to 4. Got {self.orders}.")
        for name in ("prompt", "second_prompt"):
            value = getattr(self, name)
            if value not in PROMPTS and (name == "prompt" or value is not None):
                raise ValueError(f"`{name}` must be one of {PROMPTS}. Got {value!r}.")
        if not 1 <= self.second_orders <= 4:
            raise ValueError(f"`second_orders` must be 1 to 4. Got {self.second_orders}.")


@dataclass(frozen=True)
class GoalPlan(Plan):
    """Calls to a solved goal, or the question / refusal that stands instead (no calls)."""

    calls: tuple[SkillCall, ...] = ()
    constraints: str = ""
    goal: Goal | None = None
    question: Question | None = None
    refusal: Refusal | None = None
    completions: tuple[Completion, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        if self.question is not None:
            return "ask"
        return "refuse" if self.refusal is not None else "calls"

    @property
    def body(self) -> tuple[SkillCall, ...]:
        return self.calls

    @property
    def message(self) -> str:
        """The question or the refusal's reason ("" for calls)."""
        if self.question is not None:
            return self.question.text
        return f"I won't do that: {self.refusal.reason}." if self.refusal is not None else ""


def planning_operators(registry: Mapping[str, Any]) -> tuple[StripsOperator, ...]:
    """The domain: the declared operators of the skills the planner plans with."""
    return tuple(
        op for name in PLANNING_SKILLS if name in registry for op in registry[name].operators
    )


def readers(llm: LLMConfig, readings: str = "both") -> tuple[LLMBackend, LLMBackend | None]:
    """The backends that read a request under `readings` (one of READINGS): the first reads with
    an adapter (`llm.lora`, else the model's shipped one) unless `readings` is "examples"; under
    "both" the plain model, prompted with examples, is the second, and the two share
    `llm.n_threads` (they read at the same time). A remote model, or one without an adapter,
    reads with the examples alone (no second)."""
    from robocompose.hierarchical.llm import backend_from_config
    from robocompose.hierarchical.llm.models import goal_adapter

    check_choice("goal_readings", readings, READINGS)
    adapter = None
    if llm.backend == "local" and readings != "examples":
        adapter = llm.lora or goal_adapter(llm.model)
    if not adapter:
        return backend_from_config(dataclasses.replace(llm, lora="")), None
    if readings != "both":
        return backend_from_config(dataclasses.replace(llm, lora=str(adapter))), None
    # the two read at the same time (`GoalPlanner._rewrites`): the threads are shared out
    threads = max(1, llm.n_threads // 2)
    first = backend_from_config(dataclasses.replace(llm, lora=str(adapter), n_threads=threads))
    return first, backend_from_config(dataclasses.replace(llm, lora="", n_threads=threads))


def reading_config(llm: LLMBackend, second: LLMBackend | None = None) -> GoalPlannerConfig:
    """How these backends read (`readers`): under the scene's grammar where the model is local;
    an adapted model with the short prompt (over placeholders where its adapter was trained on
    lifted requests) across `ADAPTED_ORDERS` scene orders, checked by the second reader's
    few-shot prompt; any other model with the examples in three orders."""
    from robocompose.hierarchical.llm import LocalLLM
    from robocompose.hierarchical.llm.models import adapter_settings

    backend = getattr(llm, "backend", llm)  # behind the cache or not
    local = isinstance(backend, LocalLLM)
    adapted = local and backend.lora is not None
    prompt = "examples"
    if adapted:
        lifted = adapter_settings(backend.lora).get("data") == "corpus"
        prompt = "lifted" if lifted else "adapted"
    return GoalPlannerConfig(
        constrain="grammar" if local else "none",
        prompt=prompt,
        orders=ADAPTED_ORDERS if adapted else GoalPlannerConfig.orders,
        second_prompt="examples" if adapted and second is not None else None,
    )


class GoalPlanner:
    """See the module docstring. `world` gives the facts now and the table's free spots.
    `second`: the second reader's backend (default: `llm`), used when the config names a
    `second_prompt`. `readers` and `reading_config` build both from an `LLMConfig`."""

    def __init__(
        self,
        llm: LLMBackend,
        registry: Mapping[str, Any],
        world: Any,
        config: GoalPlannerConfig | None = None,
        second: LLMBackend | None = None,
    ) -> None:
        self.llm, self.registry, self.world = llm, registry, world
        self.second = second if second is not None else llm
        self.config = config or GoalPlannerConfig()
        self.scene = SceneNames.of(world)
        self.operators = planning_operators(registry)
        missing = [s for s in ("pick", "place", "place_at") if s not in registry]
        if missing:
            raise ValueError(f"the goal planner needs the skills {missing} in the registry.")
        self.grammar = gbnf(self.scene) if self.config.constrain == "grammar" else None
        self._goal: tuple[str, Goal, str] | None = None  # (instruction, goal, constraints)
        # the last instruction a word check refused or asked about: an answer joins it, and only
        # what the answer adds is checked again
        self._checked: str | None = None

    @property
    def goal(self) -> Goal | None:
        """The goal solved for the current instruction (None before one is)."""
        return None if self._goal is None else self._goal[1]

    def reached(self, world: Any) -> bool:
        """The solved goal's facts hold in `world` (False before a goal is solved)."""
        return self.goal is not None and goal_facts(self.goal) <= world.facts()

    def reset_goal(self) -> None:
        """Forget the solved goal: the next plan asks the LLM again."""
        self._goal = None

    def plan(
        self,
        instruction: str,
        world_summary: str | Mapping[str, Any] | None = None,
        feedback: str | None = None,
    ) -> GoalPlan:
        """Calls from the world's facts now to the instruction's goal (see the module doc).

        Before the LLM: a colour the request names that the scene lacks is refused, and so is
        what picking and placing cannot do (`beyond_skills`). "In the bin" among several bins is
        asked back after the reading, every bin's goal numbered. After each
        rewrite: a goal naming blocks the request does not is asked back; then the rewrites under
        the other example orders must solve to the same goal (else: which reading?)."""
        facts = self.world.facts()
        if self._goal is not None and self._goal[0] == instruction:
            _, goal, text = self._goal
            return self.calls_to(goal, facts, text)
        said = instruction  # an answer joins what a check held back: check only what it adds
        if self._checked is not None and instruction.startswith(self._checked.rstrip(".")):
            said = instruction[len(self._checked.rstrip(".")) :]
        missing = missing_names(said, self.scene)
        if missing:
            self._checked = instruction
            names = " or ".join(missing)
            reason = f"there is no {names} in the scene (it has {scene_names(self.scene)})"
            return GoalPlan(refusal=Refusal(reason, "absent"))
        beyond = beyond_skills(said, self.scene)
        if beyond:
            self._checked = instruction
            return GoalPlan(refusal=Refusal(beyond, "unsupported"))
        readings: list[tuple[str, Outcome]] = []
        completions: tuple[Completion, ...] = ()
        for (llm, chat, lifted), (text, done, problem) in self._rewrites(instruction, facts):
            completions += done
            if problem is not None:
                return GoalPlan(constraints=text, completions=completions, problems=(problem,))
            outcome = solve(parse(text, self.scene), facts, self.scene, self.operators)
            if not readings:
                solver_revises = self.config.revise_solver and _revisable(outcome)
                if not isinstance(outcome, Goal) and solver_revises:
                    message = _solver_message(outcome)
                    revised, done = self._revise(chat, llm, lifted, text, message, facts)
                    completions += done
                    if revised is not None and isinstance(revised[1], Goal):
                        text, outcome = revised
                if not isinstance(outcome, Goal):
                    return self._settle(instruction, text, outcome, facts, completions)
                unnamed = ungrounded_blocks(instruction, text, self.scene)
                if unnamed:
                    question = Question(
                        f"Which blocks do you mean? You did not name {', '.join(unnamed)}; the "
                        f"scene has {scene_names(self.scene)}.",
                        kind="unclear",
                    )
                    return GoalPlan(constraints=text, question=question, completions=completions)
            readings.append((text, outcome))
            if not same_goal(readings[0][1], outcome):
                break
        if all(same_goal(readings[0][1], o) for _, o in readings):
            text, outcome = readings[0]
            goals = self._every_bin(text, facts) if bare_bin(said, self.scene) else []
            if len(goals) > 1:  # "in the bin" among several: the model picked one, ask which
                self._checked = instruction
                question = _which_reading(goals, [])
                return GoalPlan(constraints=text, question=question, completions=completions)
            return self._settle(instruction, text, outcome, facts, completions)
        if self.config.revise:
            first_llm, first_chat, first_lifted = self._readers(instruction, facts)[0]
            said = "; ".join(
                f"({k + 1}) {t} means {_meaning(o)}" for k, (t, o) in enumerate(readings)
            )
            message = f"The request was read more than one way: {said}"
            revised, done = self._revise(first_chat, first_llm, first_lifted, "", message, facts)
            completions += done
            if revised is not None:
                readings.append(revised)
        return self._resolve(instruction, readings, facts, completions)

    def _every_bin(self, text: str, facts: State) -> list[Goal]:
        """The distinct goals of `text` with the one bin it names replaced by each of the
        scene's bins ([] when it names none or several)."""
        named = set(_BIN_NAME.findall(text))
        if len(named) != 1:
            return []
        pattern = re.compile(rf"\b{re.escape(named.pop())}\b")
        variants = [pattern.sub(name, text) for name in self.scene.bins]
        return _distinct_goals(
            [(v, solve(parse(v, self.scene), facts, self.scene, self.operators)) for v in variants]
        )

    def _rewrites(
        self, instruction: str, facts: State
    ) -> Iterator[tuple[tuple[LLMBackend, list[Message], Lifted | None], Rewrite]]:
        """Each reader's rewrite, in order. A second backend's rewrites start at once on their
        own thread (llama.cpp releases the interpreter lock while it computes), so the second
        reader reads while the first does; the first's come one by one, so a first reading
        that settles the request costs no more of them."""
        readers = self._readers(instruction, facts)
        first = readers[0][0]
        others = [r for r in readers if r[0] is not first]
        pool = ThreadPoolExecutor(max_workers=1) if others else None
        ahead = (
            pool.submit(lambda: [self.rewrite(chat, llm, lifted) for llm, chat, lifted in others])
            if pool is not None
            else None
        )
        try:
            k = 0
            for reader in readers:
                if reader[0] is first:
                    yield reader, self.rewrite(reader[1], reader[0], reader[2])
                else:
                    yield reader, ahead.result()[k]  # type: ignore[union-attr]
                    k += 1
        finally:
            if pool is not None:
                pool.shutdown(wait=True)

    def _revise(
        self,
        chat: Sequence[Message],
        llm: LLMBackend,
        lifted: Lifted | None,
        text: str,
        message: str,
        facts: State,
    ) -> tuple[tuple[str, Outcome] | None, tuple[Completion, ...]]:
        """The reader's rewrite once more, told what went wrong (`message`, in the scene's
        words; lifted again where the reader reads placeholders); None if it does not parse."""
        if lifted is not None:
            text, message = lifted.raise_text(text), lifted.raise_text(message)
        follow = [*chat]
        if text:
            follow.append({"role": "assistant", "content": text})
        follow.append(
            {"role": "user", "content": f"{message}. Read the request again and write the "
             "constraints it asks for."}
        )  # fmt: skip
        revised, done, problem = self.rewrite(follow, llm, lifted)
        if problem is not None:
            return None, done
        outcome = solve(parse(revised, self.scene), facts, self.scene, self.operators)
        return (revised, outcome), done

    def _resolve(
        self,
        instruction: str,
        readings: list[tuple[str, Outcome]],
        facts: State,
        completions: tuple[Completion, ...],
    ) -> GoalPlan:
        """Readings that disagree: the goal the noisy channel clearly prefers, or a question."""
        goals = _distinct_goals(readings)
        votes = [sum(same_goal(g, o) for _, o in readings) for g in goals]
        none = sum(not isinstance(o, Goal) for _, o in readings)
        scores = self._channel_scores(instruction, goals) if self.config.noisy_channel else None
        if scores is not None and goals:
            ranked = sorted(range(len(goals)), key=lambda k: -scores[k])
            best = ranked[0]
            lead = scores[best] - scores[ranked[1]] if len(goals) > 1 else float("inf")
            if lead >= self.config.channel_margin and votes[best] > none:
                text = next(t for t, o in readings if same_goal(goals[best], o))
                return self._settle(instruction, text, goals[best], facts, completions)
            goals = [goals[k] for k in ranked]
        return GoalPlan(
            constraints=" | ".join(t for t, _ in readings),
            question=_which_reading(goals, readings),
            completions=completions,
        )

    def _channel_scores(self, instruction: str, goals: Sequence[Goal]) -> list[float] | None:
        """log p(request | goal said in plain words) per goal, by the second reader (the model
        without an adapter) where there is one; None if the backend cannot score."""
        if not goals:
            return None
        scorer = self.second if self.config.second_prompt is not None else self.llm
        score = getattr(scorer, "score", None)
        if score is None:
            return None
        differ = _differing_blocks(goals)
        try:
            return [
                score(CHANNEL_PROMPT.format(goal=say_goal(g, differ)), [f" {instruction}"])[0]
                for g in goals
            ]
        except NotImplementedError:
            return None

    def prompts(
        self,
        instruction: str,
        facts: State = frozenset(),
        prompt: str | None = None,
        orders: int | None = None,
    ) -> list[list[Message]]:
        """The chats the rewrites run on, one per order (default: the config's `prompt` and
        `orders`): the few-shot examples in `orders` orders, or (adapted prompt) the scene's
        blocks and bins listed in `orders` orders. The scene shows where the blocks are as
        `facts` say."""
        prompt = prompt or self.config.prompt
        orders = orders or self.config.orders
        if prompt == "lifted":
            lifted = lift(instruction, self.scene)
            now = lifted.lift_facts(facts)
            return [
                short_messages(scene, lifted.request, now)
                for scene in scene_orders(lifted.scene, orders)
            ]
        if prompt == "adapted":
            return [
                short_messages(scene, instruction, facts)
                for scene in scene_orders(self.scene, orders)
            ]
        return [
            messages(self.scene, instruction, facts, examples)
            for examples in example_orders(orders)
        ]

    def _readers(
        self, instruction: str, facts: State
    ) -> list[tuple[LLMBackend, list[Message], Lifted | None]]:
        """Every rewrite a goal needs, in order: the first reader's, then the second's, each
        with the lifting its text is lowered by (None: the text names the scene itself)."""
        lifted = lift(instruction, self.scene)

        def reader(prompt: str) -> Lifted | None:
            return lifted if prompt == "lifted" else None

        first = reader(self.config.prompt)
        readers = [(self.llm, chat, first) for chat in self.prompts(instruction, facts)]
        if self.config.second_prompt is not None:
            prompt = self.config.second_prompt
            second = self.prompts(instruction, facts, prompt, self.config.second_orders)
            readers += [(self.second, chat, reader(prompt)) for chat in second]
        return readers

    def rewrite(
        self, chat: Sequence[Message], llm: LLMBackend | None = None, lifted: Lifted | None = None
    ) -> tuple[str, tuple[Completion, ...], str | None]:
        """The LLM's (default: the first reader's) constraint text for one prompt, its
        completions, and a parse problem if it has one (free decoding: the parser's message
        goes back once). `lifted`: the prompt was over placeholders; the grammar is too, and
        the text comes back in the scene's words."""
        llm = llm or self.llm
        chat = list(chat)
        grammar = self.grammar
        if lifted is not None and grammar is not None:
            grammar = gbnf(lifted.scene)
        completions: list[Completion] = []
        for _ in range(MAX_REWRITES):
            completion = llm.chat(chat, max_tokens=self.config.max_tokens, grammar=grammar)
            completions.append(completion)
            text = completion.text.strip().splitlines()[0] if completion.text.strip() else ""
            if lifted is not None:
                text = lifted.lower(text)
            try:
                parse(text, self.scene)
                return text, tuple(completions), None
            except ConstraintSyntaxError as error:
                problem = str(error)
                chat = [
                    *chat,
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": f"Not valid: {problem}. Answer again."},
                ]
        return text, tuple(completions), problem

    def decide(
        self,
        instruction: str,
        text: str,
        facts: State,
        completions: tuple[Completion, ...] = (),
    ) -> GoalPlan:
        """Solve the constraint text against `facts`; plan to the goal, or ask, or refuse."""
        outcome = solve(parse(text, self.scene), facts, self.scene, self.operators)
        return self._settle(instruction, text, outcome, facts, completions)

    def _settle(
        self,
        instruction: str,
        text: str,
        outcome: Outcome,
        facts: State,
        completions: tuple[Completion, ...] = (),
    ) -> GoalPlan:
        if isinstance(outcome, Question):
            return GoalPlan(constraints=text, question=outcome, completions=completions)
        if isinstance(outcome, Refusal):
            return GoalPlan(constraints=text, refusal=outcome, completions=completions)
        self._goal = (instruction, outcome, text)
        return self.calls_to(outcome, facts, text, completions)

    def choose(self, instruction: str, goal: Goal, text: str = "") -> GoalPlan:
        """Plan to an option a person picked from a question (no LLM call)."""
        self._goal = (instruction, goal, text)
        return self.calls_to(goal, self.world.facts(), text)

    def calls_to(
        self, goal: Goal, facts: State, text: str = "", completions: tuple[Completion, ...] = ()
    ) -> GoalPlan:
        """The planning library's calls from `facts` to `goal`."""
        found = find_plan(facts, goal_facts(goal), self.operators, self.scene, self.config.engine)
        if found is None:
            refusal = Refusal(
                f"no sequence of skill calls reaches {goal.described()} from the scene now",
                "unreachable",
            )
            return GoalPlan(constraints=text, goal=goal, refusal=refusal, completions=completions)
        calls = self._skill_calls(found)
        return GoalPlan(tuple(calls), text, goal, completions=completions)

    def _skill_calls(self, ops: Sequence[GroundOperator]) -> list[SkillCall]:
        taken: list[np.ndarray] = []
        calls = []
        for op in ops:
            args: dict[str, Any] = dict(op.call_args())
            if op.skill == "place_at":
                xy = self._free_spot(taken)
                taken.append(xy)
                args |= {"x": round(float(xy[0]), 3), "y": round(float(xy[1]), 3)}
            calls.append(SkillCall(op.skill, args))
        return calls

    def _free_spot(self, taken: list[np.ndarray]) -> np.ndarray:
        """The grid spot nearest the table's centre that keeps the gap to every block (where it
        is now), every bin and every spot already chosen."""
        others = [
            np.asarray(self.world.position(n)[:2]) for n in (*self.scene.blocks, *self.scene.bins)
        ]
        others += taken
        ticks = np.arange(-SPOT_RANGE_M, SPOT_RANGE_M + 1e-9, SPOT_GRID_M)
        grid = sorted(((x, y) for x in ticks for y in ticks), key=lambda p: np.hypot(*p))
        for gap in (SPOT_GAP_M, 0.8 * SPOT_GAP_M):
            for point in grid:
                xy = np.asarray(point)
                if all(np.linalg.norm(xy - o) >= gap for o in others):
                    return xy
        raise RuntimeError("no free spot on the table to put a block down")


def _distinct_goals(readings: Sequence[tuple[str, Outcome]]) -> list[Goal]:
    goals: list[Goal] = []
    for _, outcome in readings:
        if isinstance(outcome, Goal) and all(not same_goal(outcome, g) for g in goals):
            goals.append(outcome)
    return goals


def _differing_blocks(goals: Sequence[Goal]) -> list[str]:
    """The blocks whose place the goals do not agree on (all of them for a single goal)."""
    blocks = sorted(goals[0].config.support)
    differ = [b for b in blocks if len({g.config.support.get(b) for g in goals}) > 1]
    return differ or blocks


def say_goal(goal: Goal, blocks: Sequence[str] | None = None) -> str:
    """A goal in plain words: "the red block on the blue block, the green block in the green
    bin, the white block on the table" (for `blocks`, default all)."""

    def thing(name: str) -> str:
        word, _, kind = name.rpartition("_")
        return f"the {word.replace('_', ' ')} {kind}"

    parts = []
    for block, below in sorted(goal.config.support.items()):
        if blocks is not None and block not in blocks:
            continue
        where = (
            "on the table"
            if below == "table"
            else f"{'in' if below.endswith('_bin') else 'on'} {thing(below)}"
        )
        parts.append(f"{thing(block)} {where}")
    return ", ".join(parts)


def _meaning(outcome: Outcome) -> str:
    """What a reading asks for, in plain words, or why it gives no goal."""
    if isinstance(outcome, Goal):
        return say_goal(outcome)
    return f"no goal ({_solver_message(outcome)})"


def _solver_message(outcome: Outcome) -> str:
    return outcome.text if isinstance(outcome, Question) else outcome.reason


def _revisable(outcome: Outcome) -> bool:
    """No single goal because the constraints contradict or leave several goals: a misreading
    can cause both, so the reader may try once more."""
    if isinstance(outcome, Question):
        return outcome.kind == "ambiguous"
    return isinstance(outcome, Refusal) and outcome.kind == "contradiction"


def _which_reading(goals: Sequence[Goal], readings: Sequence[tuple[str, Outcome]]) -> Question:
    """Ask which reading was meant: every goal numbered in plain words (the answer can be its
    number), and what the readings that gave no goal said."""
    differ = _differing_blocks(goals) if goals else None
    options = [f"({k + 1}) {say_goal(g, differ)}" for k, g in enumerate(goals)]
    refusals = list(
        dict.fromkeys(_solver_message(o) for _, o in readings if not isinstance(o, Goal))
    )
    text = "I can read that more than one way: " + "; ".join(options)
    if refusals:
        lead = "; or" if options else ""
        text += f"{lead} that it cannot be done as said ({'; '.join(refusals)})"
    ask = " Which do you mean? Answer with its number." if options else " What do you mean?"
    return Question(text.rstrip() + "." + ask, tuple(goals))
