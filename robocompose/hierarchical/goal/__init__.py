"""The goal machinery: the LLM states the goal, a solver pins it down, a planning library finds
the calls (the goal planner, `planners.goal`, puts them together).

    facts        the fact vocabulary (on, on_table, in, clear, holding, hand_empty, empty), the
                 world's facts, configurations, start arrangements
    strips       STRIPS operators over facts: grounding, one call run symbolically, listings
    constraints  the constraint language (on, above, bottom_up, sort, swap, if ... then ...):
                 parse and evaluate on configurations
    grammar      the language's GBNF grammar for one scene (only its names can be sampled)
    solver       constraints -> the one fewest-calls goal, a question, or a refusal
    search       the goal's calls from a planning library (pyperplan, or Fast Downward)
    prompt       the LLM prompt's fixed text and few-shot examples
"""
