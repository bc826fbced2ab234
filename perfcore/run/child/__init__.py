"""The child side of `perfcore run`, inside the user's interpreter: boot, hooks, step sources, the part it writes."""
