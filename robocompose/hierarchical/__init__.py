"""Hierarchical planning: an LLM plans skill calls, the skills drive the sim, failures are repaired.

Where things are:

    base.py        the contracts: LLMBackend, Completion, Planner and the Plan it returns (code,
                   calls or steps), SkillCall, Skill, Param, SkillResult, SkillTrace
    llm/           the backends (local.py: GGUF through llama.cpp; remote.py: OpenAI-compatible;
                   checks.py), the disk cache (cache.py), the model files (models.py), the
                   prompt's KV state on disk (prefix_state.py), the goal LoRA adapter (lora.py)
    planners/      one module per planner: code.py (Code as Policies), skills.py (a JSON skill
                   list decoded under grammar.py), saycan.py, goal.py; their prompts (prompts.py)
    goal/          the goal planner's machinery: facts, constraint language, solver, search
    skills/        the registry (registry.py), the scripted primitives (scripted.py), skills run
                   by trained policies (learned.py), their STRIPS operators (declarations.py)
    run/           running plans: plan_executor.py (PlanExecutor), the check before motion
                   (check.py), repair rounds (repair.py), language corrections (corrections.py),
                   corrections as data (correction_bank.py); the verbs (*_verb.py)
    families/      the benchmark's instruction families (dev and held-out splits, gold answers)
    sandbox/       where the code planner's programs run
    language_to_rewards/   the LLM fills a reward (rewards.py), a sampling MPC (mpc.py)
                   optimises it (pipeline.py)
    world.py       the sim world a plan acts in; tasks.py: the long-horizon tasks
    api.py         plan_and_run / Runner, behind `robocompose plan`
"""
