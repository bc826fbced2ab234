"""Zero-code profiling: the parent side (`perfcore run`: launch, child process, run folder) and the child side (boot, hooks feeding StepTimer)."""
