"""The recording engine below StepTimer and `perfcore run`: spans, CUDA events, CUPTI, step ends, settling."""
