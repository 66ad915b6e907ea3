"""Running plans in the world: the plan executor, repair rounds, corrections while a plan runs;
the `plan`, `rewards` and `corrections` verbs (`plan_verb.py`, `rewards_verb.py`,
`corrections_verb.py`: each a `run(config)` the command line calls)."""
