"""Hierarchical planning: an LLM plans skill calls, the skills drive the sim, failures are repaired.

Where things are:

    base.py        the contracts: LLMBackend, Completion, Planner and the Plan it returns (code,
                   calls or steps), SkillCall, Skill, Param, SkillResult, SkillTrace
    llm/           the backends (local.py: GGUF through llama.cpp; remote.py: OpenAI-compatible;
                   checks.py) and their settings (LLMConfig), the disk cache (cache.py), the
                   model files and shipped adapters (models.py), the prompt's KV state on disk
                   (prefix_state.py)
    planners/      one module per planner: code.py (Code as Policies), skills.py (a JSON skill
                   list decoded under grammar.py), saycan.py, goal.py; their prompts (prompts.py)
    goal/          the goal planner's machinery: facts, constraint language, lifting (names to
                   placeholders), solver, search
    skills/        the registry (registry.py), the scripted primitives (scripted.py), skills run
                   by trained policies (learned.py), their STRIPS operators (declarations.py)
    run/           running plans: plan_executor.py (PlanExecutor), the check before motion
                   (check.py), repair rounds (repair.py), language corrections (corrections.py),
                   corrections as data (correction_bank.py)
    instructions/  the benchmark's data: instruction items by collection (dev, test,
                   long_horizon) and category, read from data/*.yaml by one loader, one
                   make_world, the gold checks, the simulated person who corrects runs
    adapter/       adapting the model to the constraint language: the corpus of wordings
                   (corpus.py, wordings.yaml), the dev-split pairs (pairs.py), LoRA training
                   (train.py, `robocompose adapt`); planning code never imports it
    sandbox/       where the code planner's programs run
    world.py       the sim world a plan acts in
    api.py         plan_and_run / Runner, behind `robocompose plan` (robocompose/verbs/plan.py)

Language to Rewards, which uses neither the planners nor run/, is the sibling package
`robocompose.language_to_rewards`.
"""
