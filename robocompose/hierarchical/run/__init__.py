"""Running plans in the world: the plan executor, repair rounds, corrections while a plan runs;
the machinery of the `plan`, `rewards` and `corrections` verbs (`robocompose.verbs.plan`,
`.rewards`, `.corrections`)."""
