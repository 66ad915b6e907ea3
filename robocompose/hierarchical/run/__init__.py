"""Running plans in the world: the plan executor, repair rounds, corrections while a plan runs."""
