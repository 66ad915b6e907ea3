"""Adapting the planner's model to the constraint language: training pairs from the dev split
(`pairs`) and LoRA training on the CPU, written as a llama.cpp adapter (`train`). Planning code
never imports this package: it only loads the adapter file it writes."""
