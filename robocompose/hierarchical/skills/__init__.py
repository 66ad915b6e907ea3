"""Skills: the registry the planners call through, the scripted primitives, learned skills."""
