"""Everything that records: native CUPTI tracing, CUDA events, the NVML/CPU sampler and the machine check. Knows nothing of verdicts or files."""
