"""The planners: each turns an instruction and the scene into a `base.Plan` (`base.Planner`)."""
